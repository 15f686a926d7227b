#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the Grafana dashboards ntcore-gpu.json and ntcore-host.json next to
this file. Edit the panels here and re-run; the JSON files are committed so
users need neither Python nor this script. Every metric used must exist in
the tree: tests/integration/prometheus_dashboards.sh checks the names against
the plugins' sources and every expression with promtool.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'instance=~"$instance"'
RI = "$__rate_interval"


class Board:
    def __init__(self, uid, title, description, tags):
        self.uid, self.title, self.description, self.tags = (
            uid, title, description, tags)
        self.panels = []
        self.y = 0
        self.x = 0
        self.row_h = 0
        self.next_id = 1

    def _id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def row(self, title):
        self._newline()
        self.panels.append({"id": self._id(), "type": "row", "title": title,
                            "collapsed": False, "panels": [],
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}})
        self.y += 1

    def _newline(self):
        if self.x:
            self.y += self.row_h
            self.x = 0
            self.row_h = 0

    def _place(self, w, h):
        if self.x + w > 24:
            self._newline()
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def panel(self, kind, title, targets, unit="short", w=12, h=8,
              description="", options=None, field=None):
        tg = []
        for i, t in enumerate(targets):
            expr, legend = t[0], t[1]
            d = {"refId": chr(ord("A") + i), "datasource": DS, "expr": expr,
                 "legendFormat": legend, "range": True}
            if kind in ("table", "stat", "bargauge"):
                d["instant"] = True
                d["range"] = False
                if kind == "table":
                    d["format"] = "table"
            tg.append(d)
        defaults = {"unit": unit}
        if field:
            defaults.update(field)
        p = {"id": self._id(), "type": kind, "title": title,
             "description": description, "datasource": DS,
             "gridPos": self._place(w, h), "targets": tg,
             "fieldConfig": {"defaults": defaults, "overrides": []}}
        if kind == "timeseries":
            p["options"] = {"legend": {"displayMode": "table",
                                       "placement": "bottom",
                                       "calcs": ["mean", "max", "lastNotNull"]},
                            "tooltip": {"mode": "multi", "sort": "desc"}}
            defaults.setdefault("custom", {"fillOpacity": 10,
                                           "showPoints": "never"})
        if options:
            p.setdefault("options", {}).update(options)
        self.panels.append(p)

    def ts(self, title, targets, unit="short", **kw):
        self.panel("timeseries", title, targets, unit, **kw)

    def json(self):
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": self.tags,
            "timezone": "browser",
            "editable": True,
            "graphTooltip": 1,
            "schemaVersion": 38,
            "version": 1,
            "refresh": "10s",
            "time": {"from": "now-1h", "to": "now"},
            "annotations": {"list": []},
            "links": [],
            "templating": {"list": [
                {"name": "datasource", "label": "Data source",
                 "type": "datasource", "query": "prometheus", "hide": 0,
                 "current": {}, "options": [], "refresh": 1, "regex": ""},
                {"name": "instance", "label": "ntcore instance",
                 "type": "query", "datasource": DS,
                 "definition": "label_values(ntcore_build_info, instance)",
                 "query": {"query": "label_values(ntcore_build_info, instance)",
                           "refId": "instance"},
                 "includeAll": True, "multi": True, "refresh": 2,
                 "sort": 1, "hide": 0, "current": {}, "options": [],
                 "regex": ""},
            ]},
            "panels": self.panels,
        }


def rate(metric, by, extra=""):
    sel = SEL + ("," + extra if extra else "")
    return "sum by (%s) (rate(%s{%s}[%s]))" % (by, metric, sel, RI)


def quantile(q, metric, by):
    b = "le" + (", " + by if by else "")
    return "histogram_quantile(%s, sum by (%s) (rate(%s_bucket{%s}[%s])))" % (
        q, b, metric, SEL, RI)


def gpu():
    b = Board("ntcore-gpu", "ntcore / GPU",
              "CUDA activity seen by ntcore's cuda probe and detectors: "
              "launches, device memory, copies, API errors, alerts.",
              ["ntcore", "gpu", "cuda"])
    b.row("Kernels")
    b.ts("Kernel launches/s by kernel (top 15)",
         [("topk(15, %s)" % rate("ntcore_cuda_launches_total", "kernel"),
           "{{kernel}}")], "ops", w=16, h=10,
         description="ntcore_cuda_launches_total, summed over processes.")
    b.ts("Kernel launches/s by process",
         [(rate("ntcore_cuda_launches_total", "pid"), "pid {{pid}}"),
          (rate("ntcore_cuda_graph_launches_total", "pid"),
           "graphs, pid {{pid}}")], "ops", w=8, h=10)
    b.row("Device memory")
    b.ts("Device memory by process and device",
         [("sum by (pid, device) (ntcore_cuda_memory_bytes{%s})" % SEL,
           "pid {{pid}} dev {{device}}")], "bytes", w=12,
         description="Outstanding (allocated, not freed) bytes, "
                     "ntcore_cuda_memory_bytes.")
    b.ts("Allocated and freed bytes/s by process",
         [(rate("ntcore_cuda_alloc_bytes_total", "pid"), "alloc pid {{pid}}"),
          (rate("ntcore_cuda_free_bytes_total", "pid"), "free pid {{pid}}")],
         "Bps", w=12)
    b.ts("Leak growth probability",
         [("ntcore_cuda_memleak_growth_probability{%s}" % SEL,
           "pid {{pid}} dev {{device}}")], "percentunit", w=8,
         field={"min": 0, "max": 1},
         description="cuda_memleak detector: estimate that live memory keeps "
                     "growing.")
    b.ts("Fragmentation score",
         [("ntcore_cuda_frag_score{%s}" % SEL, "pid {{pid}} dev {{device}}")],
         "short", w=8, field={"min": 0, "max": 100})
    b.ts("Failed device allocations (OOM)",
         [("sum by (pid, device) (increase(ntcore_cuda_oom_failures_total{%s}[%s]))"
           % (SEL, RI), "pid {{pid}} dev {{device}}")], "short", w=8)
    b.row("Copies")
    b.ts("Copy throughput by direction",
         [(rate("ntcore_cuda_copy_bytes_total", "direction"), "{{direction}}")],
         "Bps", w=12, description="Bytes per second over every copy call "
                                  "(ntcore_cuda_copy_bytes_total).")
    b.ts("Synchronous copy bandwidth by direction",
         [("max by (direction) (ntcore_cuda_copy_bandwidth_bytes_per_second{%s})"
           % SEL, "{{direction}}")], "Bps", w=12,
         description="Bytes over time spent inside synchronous copies, since "
                     "start (ntcore_cuda_copy_bandwidth_bytes_per_second).")
    b.ts("Time blocked in synchronisation",
         [(rate("ntcore_cuda_sync_seconds_total", "pid, kind"),
           "pid {{pid}} {{kind}}")], "percentunit", w=12,
         description="Seconds per second threads spent in device, stream or "
                     "event synchronisation.")
    b.ts("Slowest CUDA calls (p99) by function",
         [("topk(10, %s)" % quantile(0.99, "ntcore_cuda_call_seconds",
                                     "function"), "{{function}}")],
         "s", w=12)
    b.row("Errors and alerts")
    b.ts("CUDA API errors/s by function and error",
         [(rate("ntcore_cuda_api_errors_total", "function, error"),
           "{{function}}: {{error}}")], "short", w=12)
    b.panel("table", "CUDA API errors in the time range",
            [("sum by (function, error) (increase(ntcore_cuda_api_errors_total{%s}[$__range])) > 0"
              % SEL, "")], "short", w=12,
            options={"showHeader": True})
    b.ts("Alerts by type and severity",
         [("sum by (alert, severity) (increase(ntcore_prometheus_alerts_total{%s}[%s]))"
           % (SEL, RI), "{{alert}} ({{severity}})")], "short", w=12,
         field={"custom": {"drawStyle": "bars", "fillOpacity": 60}},
         description="Every alert.* event a detector published, counted by "
                     "the prometheus sink.")
    b.panel("stat", "Alerts in the time range",
            [("sum by (severity) (increase(ntcore_prometheus_alerts_total{%s}[$__range]))"
              % SEL, "{{severity}}")], "short", w=6,
            options={"colorMode": "background", "graphMode": "none",
                     "reduceOptions": {"calcs": ["lastNotNull"]}},
            field={"thresholds": {"mode": "absolute", "steps": [
                {"color": "green", "value": None},
                {"color": "red", "value": 1}]}})
    b.ts("GPU quiet time (hang detector)",
         [("ntcore_cuda_hang_quiet_seconds{%s}" % SEL, "pid {{pid}}")], "s",
         w=6)
    return b


def host():
    b = Board("ntcore-host", "ntcore / Host",
              "Scheduler, block I/O, network and memory as seen by ntcore's "
              "probes, and ntcore's own health.",
              ["ntcore", "host"])
    b.row("CPU and scheduler")
    b.ts("On-CPU time by process (top 15)",
         [("topk(15, %s)" % rate("ntcore_sched_oncpu_seconds_total",
                                 "pid, comm"), "{{comm}} ({{pid}})")],
         "short", w=12, field={"custom": {"fillOpacity": 10,
                                         "showPoints": "never",
                                         "axisLabel": "CPUs"}},
         description="CPU seconds per second (1 = one CPU busy), from "
                     "ntcore_sched_oncpu_seconds_total.")
    b.ts("Run-queue latency",
         [(quantile(0.5, "ntcore_sched_runqueue_latency_seconds", ""), "p50"),
          (quantile(0.9, "ntcore_sched_runqueue_latency_seconds", ""), "p90"),
          (quantile(0.99, "ntcore_sched_runqueue_latency_seconds", ""), "p99")],
         "s", w=12, description="Wakeup or preemption to running, all "
                                "traced processes.")
    b.ts("Run-queue wait by process (top 10)",
         [("topk(10, %s)" % rate("ntcore_sched_runqueue_wait_seconds_total",
                                 "pid, comm"), "{{comm}} ({{pid}})")],
         "percentunit", w=12,
         description="Seconds per second threads waited for a CPU.")
    b.ts("Context switches and migrations/s",
         [(rate("ntcore_sched_context_switches_total", "kind"), "{{kind}}"),
          ("sum(rate(ntcore_sched_migrations_total{%s}[%s]))" % (SEL, RI),
           "migrations")], "ops", w=12)
    b.row("Block I/O")
    b.ts("I/O throughput by device and operation",
         [(rate("ntcore_io_bytes_total", "device, op"), "{{device}} {{op}}")],
         "Bps", w=12)
    b.ts("I/O requests/s by device and operation",
         [(rate("ntcore_io_requests_total", "device, op"), "{{device}} {{op}}")],
         "iops", w=12)
    b.ts("I/O service latency p99 by device",
         [(quantile(0.99, "ntcore_io_service_seconds", "device"),
           "{{device}} service"),
          (quantile(0.99, "ntcore_io_queue_seconds", "device"),
           "{{device}} queue")], "s", w=12,
         description="Service: issue to completion. Queue: creation to "
                     "issue.")
    b.ts("I/O throughput by process (top 10)",
         [("topk(10, %s)" % rate("ntcore_io_process_bytes_total", "pid, comm"),
           "{{comm}} ({{pid}})")], "Bps", w=12)
    b.row("Network")
    b.ts("Network sent by process (top 10)",
         [("topk(10, %s)" % rate("ntcore_net_tx_bytes_total", "pid, comm"),
           "{{comm}} ({{pid}})")], "Bps", w=12)
    b.ts("Network received by process (top 10)",
         [("topk(10, %s)" % rate("ntcore_net_rx_bytes_total", "pid, comm"),
           "{{comm}} ({{pid}})")], "Bps", w=12)
    b.ts("TCP retransmits, resets, failed connects/s",
         [("sum(rate(ntcore_net_tcp_retransmits_total{%s}[%s]))" % (SEL, RI),
           "retransmits"),
          ("sum(rate(ntcore_net_tcp_resets_sent_total{%s}[%s]))" % (SEL, RI),
           "resets sent"),
          ("sum(rate(ntcore_net_tcp_resets_received_total{%s}[%s]))" % (SEL, RI),
           "resets received"),
          ("sum(rate(ntcore_net_tcp_connect_failures_total{%s}[%s]))" % (SEL, RI),
           "connect failures")], "ops", w=12)
    b.ts("Open connections by protocol",
         [("sum by (proto) (ntcore_net_connections_active{%s})" % SEL,
           "{{proto}}")], "short", w=12)
    b.row("Memory")
    b.ts("Resident memory by process (top 10)",
         [("topk(10, ntcore_mem_rss_bytes{%s})" % SEL, "pid {{pid}}")],
         "bytes", w=12)
    b.ts("Page faults/s by process (top 10)",
         [("topk(10, %s)" % rate("ntcore_mem_page_faults_total", "pid"),
           "pid {{pid}}")], "ops", w=12)
    b.row("ntcore")
    b.ts("Events published/s by plugin",
         [(rate("ntcore_events_in_total", "plugin"), "{{plugin}}")], "ops",
         w=8)
    b.ts("Events dropped/s by stage and plugin",
         [(rate("ntcore_events_dropped_total", "stage, plugin"),
           "{{plugin}} {{stage}}")], "ops", w=8)
    b.panel("table", "Plugin state",
            [("ntcore_plugin_state{%s} == 1" % SEL, "")], "short", w=8,
            options={"showHeader": True})
    b.ts("Scrape render time (p99)",
         [(quantile(0.99, "ntcore_prometheus_scrape_duration_seconds", ""),
           "render p99")], "s", w=12)
    b.ts("Label sets over the series limit/s",
         [("sum by (metric) (rate(ntcore_metric_series_overflow_total{%s}[%s])) > 0"
           % (SEL, RI), "{{metric}}")], "ops", w=12,
         description="Updates the core dropped because a family reached its "
                     "max_series.")
    return b


def main():
    for board, name in ((gpu(), "ntcore-gpu.json"), (host(), "ntcore-host.json")):
        with open(os.path.join(HERE, name), "w") as f:
            json.dump(board.json(), f, indent=2, sort_keys=False)
            f.write("\n")


if __name__ == "__main__":
    main()
