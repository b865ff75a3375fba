"""Alert endpoints for tests/python/test_alerts.py, each run as its own process (started by the
test, stopped by PID): an HTTP(S) webhook receiver and an SMTP server with STARTTLS and AUTH.

    python alert_servers.py http  STATE_DIR [--cert F --key F]
    python alert_servers.py smtp  STATE_DIR --cert F --key F --user U --password P

Each binds 127.0.0.1 on a free port, writes the port into STATE_DIR/port (atomically) once it
accepts connections, and appends one JSON line per request to STATE_DIR/requests.jsonl. The
webhook receiver answers 503 with Retry-After: 1 while STATE_DIR/down exists, 200 otherwise."""
import argparse
import base64
import http.server
import json
import os
import signal
import ssl
import sys
import threading


def record(state, entry):
    line = json.dumps(entry) + "\n"
    with open(os.path.join(state, "requests.jsonl"), "a") as f:
        f.write(line)
        f.flush()


def announce(state, port):
    tmp = os.path.join(state, "port.tmp")
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, os.path.join(state, "port"))


def serve_http(args):
    state = args.state

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            down = os.path.exists(os.path.join(state, "down"))
            status = 503 if down else 200
            record(state, {"path": self.path, "headers": dict(self.headers),
                           "body": base64.b64encode(body).decode(), "status": status,
                           "thread": threading.get_ident()})
            self.send_response(status)
            if down:
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    announce(state, server.server_address[1])
    server.serve_forever()


def serve_smtp(args):
    import socket
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult
    state = args.state

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            record(state, {"from": envelope.mail_from, "to": list(envelope.rcpt_tos),
                           "content": envelope.content.decode("utf-8"),
                           "tls": bool(session.ssl)})
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (auth_data.login == args.user.encode() and
              auth_data.password == args.password.encode())
        record(state, {"auth": mechanism, "ok": ok})
        return AuthResult(success=ok)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    smtp = Controller(Handler(), hostname="127.0.0.1", port=port, tls_context=ctx,
                      require_starttls=True, auth_required=True, auth_require_tls=True,
                      authenticator=authenticator, ready_timeout=10)
    smtp.start()  # returns once the server answers
    announce(state, port)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    done.wait()
    smtp.stop()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["http", "smtp"])
    p.add_argument("state")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--user", default="")
    p.add_argument("--password", default="")
    args = p.parse_args()
    os.makedirs(args.state, exist_ok=True)
    (serve_http if args.kind == "http" else serve_smtp)(args)


if __name__ == "__main__":
    sys.exit(main())
