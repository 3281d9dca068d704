"""A headless Chromium driven over the DevTools protocol through --remote-debugging-pipe.

The pipe carries the protocol's JSON messages separated by NUL bytes on file descriptors 3
(commands in) and 4 (answers and events out), so no WebSocket client is needed: only the
standard library. Console errors, uncaught exceptions and failed loads are collected as events.
"""
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, binary, width=1400, height=900):
        self._profile = tempfile.TemporaryDirectory(prefix="gapless-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def plumb():  # in the child: the pipe ends become fds 3 and 4
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        args = [binary, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking",
                "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
                f"--window-size={width},{height}", "about:blank"]
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, preexec_fn=plumb, pass_fds=(3, 4),
                                     stdout=self._log, stderr=subprocess.STDOUT)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._answers = {}
        self._cv = threading.Condition()
        self.events = queue.Queue()
        self.errors = []  # console errors, exceptions, failed loads: text per entry
        threading.Thread(target=self._read, daemon=True).start()
        self.session = None

    def _read(self):
        buf = b""
        while True:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                with self._cv:
                    self._answers["closed"] = True
                    self._cv.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cv:
                        self._answers[msg["id"]] = msg
                        self._cv.notify_all()
                else:
                    self._note(msg)

    def _note(self, msg):
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                      for a in p.get("args", [])))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            self.errors.append(f"log: {e.get('text')} {e.get('url', '')}")
        self.events.put(msg)

    def call(self, method, params=None, session=True, timeout=30):
        with self._cv:
            self._next_id += 1
            mid = self._next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        with self._cv:
            while mid not in self._answers:
                if self._answers.get("closed"):
                    raise RuntimeError("chromium closed the pipe: " + self.log_tail())
                left = deadline - time.time()
                if left <= 0:
                    raise TimeoutError(f"{method}: no answer in {timeout} s")
                self._cv.wait(left)
            answer = self._answers.pop(mid)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def open_page(self):
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.call("Target.attachToTarget",
                             {"targetId": target["targetId"], "flatten": True}, session=False)
        self.session = attached["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")

    def navigate(self, url):
        self.call("Page.navigate", {"url": url})

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails'].get('text')}")
        return r.get("result", {}).get("value")

    def wait_for(self, expression, timeout=20):
        """The expression's value once truthy; an error naming it past the deadline."""
        deadline = time.time() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.time() > deadline:
                raise TimeoutError(f"still false after {timeout} s: {expression}")
            time.sleep(0.1)

    def screenshot(self, path, width, height):
        import base64
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def log_tail(self):
        self._log.seek(0)
        return self._log.read()[-2000:].decode(errors="replace")

    def close(self):
        try:
            self.call("Browser.close", session=False, timeout=5)
        except Exception:  # already gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        self._profile.cleanup()
