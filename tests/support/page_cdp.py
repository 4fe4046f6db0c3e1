"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (no websocket, no extra package).

Chromium reads NUL-terminated JSON commands from fd 3 and writes responses and events to
fd 4. The browser runs headless with the network cut three ways: a dead proxy, a host
resolver that resolves nothing, and DevTools' offline emulation; every request the page
makes is recorded (``Network.requestWillBeSent``) so a test can prove none left ``file://``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with a page target attached (flattened session)."""

    def __init__(self, binary: str, profile: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def on_fds() -> None:  # in the child: the pipe ends become fds 3 (commands) and 4 (replies)
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [
            binary,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--proxy-server=127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--window-size=1400,1000",
            "about:blank",
        ]
        self.process = subprocess.Popen(
            args, preexec_fn=on_fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        targets = self.send("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            self.call(method)
        self.call(
            "Network.emulateNetworkConditions",
            {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
        )

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                message, buffer = buffer.split(b"\0", 1)
                self._messages.put(json.loads(message))

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one command and wait for its reply; events that arrive meanwhile are kept in ``events``."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode("utf-8") + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._messages.get(timeout=max(0.1, deadline - time.monotonic()))
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.send(method, params, self.session)

    def wait_for(self, method: str, since: int = 0) -> dict[str, Any]:
        """The first event ``method`` at or after position ``since`` of ``events`` (waits for it)."""
        deadline = time.monotonic() + self.timeout
        while True:
            for event in self.events[since:]:
                if event.get("method") == method:
                    return event
            try:
                self.events.append(self._messages.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                raise TimeoutError(f"no {method} event within {self.timeout} s") from None

    def open(self, url: str) -> None:
        since = len(self.events)
        self.call("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired", since)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        shot = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors (CSP violations, failed loads)."""
        errors = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                # The message itself first (a long file:// URL must not push it past the cut).
                details = params["exceptionDetails"]
                exception = details.get("exception") or {}
                message = f"{details.get('text', '')} {exception.get('description') or exception.get('value') or ''}".strip()
                errors.append((message or json.dumps(details))[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(json.dumps(params.get("args"))[:500])
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(f"{params['entry'].get('source')}: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        return errors

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, queue.Empty, OSError):
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
