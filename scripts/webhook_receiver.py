#!/usr/bin/env python3
"""A receiver for Herald's webhook delivery (SPEC §13.3): checks each request's Standard Webhooks
signature, answers 200 (401 if it does not verify) and prints each job once.
Usage: WEBHOOK_SECRET=whsec_... python3 scripts/webhook_receiver.py [port, default 9000]"""
import base64, hashlib, hmac, json, os, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEY = base64.b64decode(os.environ["WEBHOOK_SECRET"].removeprefix("whsec_"))
seen, lock = set(), threading.Lock()  # at least once: a job's webhook-id is the same on every attempt

class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        msg_id, stamp = self.headers.get("webhook-id", ""), self.headers.get("webhook-timestamp", "0")
        signed = hmac.new(KEY, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
        expected = base64.b64encode(signed).decode()
        given = [s[3:] for s in self.headers.get("webhook-signature", "").split() if s.startswith("v1,")]
        ok = stamp.isdigit() and abs(time.time() - int(stamp)) < 300 and any(hmac.compare_digest(expected, s) for s in given)
        self.send_response(200 if ok else 401)
        self.end_headers()
        with lock:  # requests arrive on several threads
            if ok and msg_id not in seen:
                seen.add(msg_id)
                job = json.loads(body)
                print(msg_id, job["recipient"], job["kind"], (job["notification"] or {}).get("body", ""), flush=True)

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 9000), Receiver).serve_forever()
