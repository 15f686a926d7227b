# SPDX-License-Identifier: MIT
"""Drive headless Chromium (Debian's `chromium`) through the DevTools
protocol over --remote-debugging-pipe (fd 3 in, fd 4 out, messages
NUL-terminated JSON), with no Python dependency beyond the standard
library: load a page, wait until a JavaScript condition holds, collect
console errors, uncaught exceptions, log errors (failed loads, CSP
violations) and dialogs (alert()), evaluate expressions, take a screenshot.

  cdp.py URL [--wait JS] [--eval JS]... [--screenshot PNG] [--timeout S]

Prints one JSON object: {"errors": [...], "dialogs": [...],
"waited": bool, "eval": [values]}. Exit 0 unless Chromium itself failed.
"""
import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync",
         # WebGL in software, for pages that draw with it (speedscope)
         "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
         "--window-size=1300,1000", "--remote-debugging-pipe"]


class Browser:
    def __init__(self, exe, user_dir):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def fds():
            # move both out of the way first (either may be fd 3 or 4);
            # dup2 leaves 3 and 4 inheritable, the originals close on exec
            a = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)
        self.proc = subprocess.Popen([exe] + FLAGS + ["--user-data-dir=" + user_dir,
                                                      "about:blank"],
                                     close_fds=False, preexec_fn=fds,
                                     start_new_session=True,
                                     stdout=subprocess.DEVNULL, stderr=open(os.environ.get("CDP_LOG", os.devnull), "w"))
        os.close(to_child_r)
        os.close(from_child_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def send(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        return self.wait_reply(self.next_id)

    def read_one(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.time()
            if left <= 0 or not select.select([self.from_child], [], [], left)[0]:
                raise TimeoutError("no reply from chromium")
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def wait_reply(self, want, timeout=30):
        deadline = time.time() + timeout
        while True:
            msg = self.read_one(deadline)
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:  # its renderers and helpers too: the session it leads
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait()


def collect(b, out):
    """Move the events read so far into out["errors"] / out["dialogs"]."""
    for ev in b.events:
        m, p = ev.get("method"), ev.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out["errors"].append("console.error: " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out["errors"].append("exception: " + d.get("exception", {}).get(
                "description", d.get("text", "")))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out["errors"].append("log: " + p["entry"].get("text", ""))
        elif m == "Page.javascriptDialogOpening":
            out["dialogs"].append(p.get("message", ""))
            b.send("Page.handleJavaScriptDialog", {"accept": True})
        elif m == "Page.loadEventFired":
            out["loaded"] = True
    b.events = []


def evaluate(b, expr):
    r = b.send("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                    "awaitPromise": True})
    if "exceptionDetails" in r:
        return {"exception": r["exceptionDetails"].get("text")}
    return r.get("result", {}).get("value")


def pump(b, seconds):
    """Read events for a while (the page runs meanwhile)."""
    try:
        b.wait_reply(-1, timeout=seconds)
    except TimeoutError:
        pass


def run(args):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        sys.exit("chromium not found")
    user_dir = tempfile.mkdtemp(prefix="nt-chromium-")
    b = Browser(exe, user_dir)
    out = {"errors": [], "dialogs": [], "loaded": False, "waited": False, "eval": []}
    try:
        target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        b.session = b.send("Target.attachToTarget", {"targetId": target,
                                                     "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            b.send(domain + ".enable")
        b.send("Page.navigate", {"url": args.url})
        deadline = time.time() + args.timeout
        while time.time() < deadline:
            pump(b, 0.25)
            collect(b, out)
            if out["loaded"] and (not args.wait or evaluate(b, args.wait) is True):
                out["waited"] = True
                break
        pump(b, 0.5)
        collect(b, out)
        out["eval"] = [evaluate(b, e) for e in args.eval]
        collect(b, out)
        if args.screenshot:
            shot = b.send("Page.captureScreenshot", {"format": "png",
                                                     "captureBeyondViewport": True})
            with open(args.screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
    finally:
        b.close()
        shutil.rmtree(user_dir, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--wait", default="")
    ap.add_argument("--eval", action="append", default=[])
    ap.add_argument("--screenshot")
    ap.add_argument("--timeout", type=float, default=30)
    run(ap.parse_args())
