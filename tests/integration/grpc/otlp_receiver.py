#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A small, independent OTLP/gRPC receiver for ntcore's gRPC sink tests.

It shares nothing with the sink but the .proto field numbers: the message
classes are generated here by `protoc --python_out` from sinks/grpc/proto,
and the server is Debian's python3-grpcio with generic method handlers (no
grpcio-tools needed). Every log record and metric data point it receives is
written as one JSON line to --out, so the tests can assert exact counts and
values.

  otlp_receiver.py --proto DIR --port-file F [--port N] [--out FILE]
                   [--tls-cert C --tls-key K] [--fail-code N] [--reject N]
                   [--count-only] [--count-file F]

--port 0 picks a free port; the port is written to --port-file once serving.
--fail-code N answers every logs export with gRPC status N.
--reject N   reports N rejected records (partial success) per logs export.
--count-only records nothing but counts (benchmark), and on exit writes one
             summary line: records, requests, first/last arrival (monotonic s).
SIGTERM/SIGINT: stop accepting, let calls in flight finish (grace 5 s), exit 0.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc


def load_classes(proto_dir):
    out = tempfile.mkdtemp(prefix="otlp_pb2_")
    protos = sorted(p for p in os.listdir(proto_dir) if p.endswith(".proto"))
    subprocess.run(["protoc", "--python_out=" + out, "--proto_path=" + proto_dir]
                   + [os.path.join(proto_dir, p) for p in protos], check=True)
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(["protoc", "--python_out=" + out, "--proto_path=" + here,
                    os.path.join(here, "otlp_shallow.proto")], check=True)
    sys.path.insert(0, out)
    import otlp_logs_service_pb2 as logs_svc  # noqa: E402
    import otlp_metrics_service_pb2 as metrics_svc  # noqa: E402
    import otlp_shallow_pb2 as shallow  # noqa: E402
    shutil.rmtree(out, ignore_errors=True)  # modules are loaded
    return logs_svc, metrics_svc, shallow


def any_value(v):
    """AnyValue -> [type, value] so tests can check the wire type too."""
    k = v.WhichOneof("value")
    if k is None:
        return ["none", None]
    if k == "string_value":
        return ["s", v.string_value]
    if k == "int_value":
        return ["i", v.int_value]
    if k == "double_value":
        return ["d", v.double_value]
    if k == "bool_value":
        return ["b", v.bool_value]
    if k == "bytes_value":
        return ["bytes", v.bytes_value.hex()]
    return [k, str(v)]


def attrs(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


class Receiver:
    def __init__(self, args, logs_svc, metrics_svc):
        self.args = args
        self.logs_svc = logs_svc
        self.metrics_svc = metrics_svc
        self.lock = threading.Lock()
        self.out = open(args.out, "a", buffering=1) if args.out else None
        self.records = 0
        self.requests = 0
        self.first = None
        self.last = None

    def write(self, lines):
        if self.out:
            with self.lock:
                self.out.write("".join(json.dumps(o) + "\n" for o in lines))
                self.out.flush()

    def export_logs(self, req, context):
        n = sum(len(sl.log_records) for rl in req.resource_logs for sl in rl.scope_logs)
        now = time.monotonic()
        with self.lock:
            self.records += n
            self.requests += 1
            if self.first is None:
                self.first = now
            self.last = now
        if self.args.fail_code:
            context.abort(self._code(self.args.fail_code),
                          "receiver configured to fail with %d" % self.args.fail_code)
        if not self.args.count_only:
            lines = []
            for rl in req.resource_logs:
                res = attrs(rl.resource.attributes)
                for sl in rl.scope_logs:
                    for lr in sl.log_records:
                        lines.append({
                            "kind": "log",
                            "resource": res,
                            "scope": [sl.scope.name, sl.scope.version],
                            "time": lr.time_unix_nano,
                            "observed": lr.observed_time_unix_nano,
                            "severity": lr.severity_number,
                            "severity_text": lr.severity_text,
                            "event_name": lr.event_name,
                            "body": any_value(lr.body),
                            "dropped_attributes": lr.dropped_attributes_count,
                            "attrs": attrs(lr.attributes),
                        })
            lines.append({"kind": "request", "signal": "logs", "records": n})
            self.write(lines)
        resp = self.logs_svc.ExportLogsServiceResponse()
        if self.args.reject:
            resp.partial_success.rejected_log_records = min(self.args.reject, n)
            resp.partial_success.error_message = "receiver rejects %d per request" % self.args.reject
        return resp

    @staticmethod
    def _code(n):
        for c in grpc.StatusCode:
            if c.value[0] == n:
                return c
        raise ValueError(n)

    def export_metrics(self, req, context):
        if not self.args.count_only:
            lines = []
            for rm in req.resource_metrics:
                res = attrs(rm.resource.attributes)
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        kind = m.WhichOneof("data")
                        o = {"kind": "metric", "name": m.name, "unit": m.unit,
                             "description": m.description, "type": kind, "resource": res,
                             "points": []}
                        if kind == "sum":
                            o["monotonic"] = m.sum.is_monotonic
                            o["temporality"] = m.sum.aggregation_temporality
                            pts = m.sum.data_points
                        elif kind == "gauge":
                            pts = m.gauge.data_points
                        elif kind == "histogram":
                            o["temporality"] = m.histogram.aggregation_temporality
                            pts = m.histogram.data_points
                        else:
                            pts = []
                        for p in pts:
                            d = {"attrs": attrs(p.attributes),
                                 "start": p.start_time_unix_nano,
                                 "time": p.time_unix_nano}
                            if kind == "histogram":
                                d.update(count=p.count, sum=p.sum,
                                         bucket_counts=list(p.bucket_counts),
                                         explicit_bounds=list(p.explicit_bounds))
                            else:
                                d["value"] = (p.as_double if p.WhichOneof("value") == "as_double"
                                              else p.as_int)
                            o["points"].append(d)
                        lines.append(o)
            self.write(lines)
        return self.metrics_svc.ExportMetricsServiceResponse()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--out")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--fail-code", type=int, default=0)
    ap.add_argument("--reject", type=int, default=0)
    ap.add_argument("--count-only", action="store_true")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--count-file", help="rewrite the record count here every 50 ms")
    args = ap.parse_args()

    logs_svc, metrics_svc, shallow = load_classes(args.proto)
    rx = Receiver(args, logs_svc, metrics_svc)
    # --count-only parses down to the records and counts them (benchmark);
    # otherwise every field is decoded and recorded
    logs_req = (shallow if args.count_only else logs_svc).ExportLogsServiceRequest
    logs_handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.logs.v1.LogsService",
        {"Export": grpc.unary_unary_rpc_method_handler(
            rx.export_logs,
            request_deserializer=logs_req.FromString,
            response_serializer=logs_svc.ExportLogsServiceResponse.SerializeToString)})
    metrics_handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.metrics.v1.MetricsService",
        {"Export": grpc.unary_unary_rpc_method_handler(
            rx.export_metrics,
            request_deserializer=metrics_svc.ExportMetricsServiceRequest.FromString,
            response_serializer=metrics_svc.ExportMetricsServiceResponse.SerializeToString)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.workers),
                         handlers=[logs_handler, metrics_handler],
                         options=[("grpc.max_receive_message_length", 64 << 20)])
    addr = "127.0.0.1:%d" % args.port
    if args.tls_cert:
        with open(args.tls_cert, "rb") as f:
            cert = f.read()
        with open(args.tls_key, "rb") as f:
            key = f.read()
        port = server.add_secure_port(addr, grpc.ssl_server_credentials([(key, cert)]))
    else:
        port = server.add_insecure_port(addr)
    if port == 0:
        print("otlp_receiver: cannot bind %s" % addr, file=sys.stderr)
        sys.exit(1)
    server.start()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.rename(tmp, args.port_file)

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    if args.count_file:
        def counter():
            while not done.wait(0.05):
                with rx.lock:
                    n = rx.records
                with open(args.count_file + ".tmp", "w") as f:
                    f.write("%d\n" % n)
                os.rename(args.count_file + ".tmp", args.count_file)
        threading.Thread(target=counter, daemon=True).start()
    done.wait()
    server.stop(grace=5).wait()
    if args.count_only and args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps({"kind": "summary", "records": rx.records,
                                "requests": rx.requests, "first": rx.first,
                                "last": rx.last}) + "\n")
    if rx.out:
        rx.out.close()


if __name__ == "__main__":
    main()
