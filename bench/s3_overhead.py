#!/usr/bin/env python3
"""Writing a run to a bucket instead of a local folder (issue 26, docs/storage.md).

Starts moto's S3 server on 127.0.0.1 (loopback: what is measured is trainscope's side, not a
network), then, in one process, interleaves rounds of the anchor MLP (784-512-256-10, batch 64,
1 thread) under the default ts.Hook writing to a local folder and to s3://bench/run-<n> (a
fresh run per round, order alternating), and prints the median step time of each and their
ratio. While each bucket round runs, a second process polls the bucket (ts.open_run on the
s3:// URL, every 100 ms) and notes when each step first became visible there: the visibility
delay is that time minus the step's end (both wall clocks of this machine), p50/p95.

  python3 bench/s3_overhead.py [--rounds 6] [--steps 600]
Targets (issue 26): step time <= 1.005x the local folder's; visibility p95 <= 2 s.
"""
import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import torch

try:
    import trainscope as ts
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
    import trainscope as ts

BUCKET = "bench"

POLLER = r"""
import json, sys, time
import trainscope as ts
url, until_file, out = sys.argv[1], sys.argv[2], sys.argv[3]
import os
seen = {}
while not os.path.exists(until_file):
    try:
        recs = ts.open_run(url).step_records()
        now = time.time() * 1e6
        for r in recs:
            seen.setdefault(r["step"], (now, r["end_us"]))
    except Exception:
        pass
    time.sleep(0.1)
json.dump([now_end for now_end in seen.values()], open(out, "w"))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto(log):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            return proc, port
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("moto server did not start")
            time.sleep(0.2)


def one_round(out_dir, steps, batches):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    crit = torch.nn.CrossEntropyLoss()
    times = []
    with ts.Hook(out_dir) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
        for i in range(steps):
            x, y = batches[i % len(batches)]
            t0 = time.perf_counter()
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
    return statistics.median(times[20:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="s3bench-")
    log = open(os.path.join(work, "moto.log"), "w")
    proc, port = start_moto(log)
    try:
        import boto3
        key, secret = "bench", secrets.token_urlsafe(30)  # made for this run
        env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": key,
               "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1",
               "TRAINSCOPE_SPOOL_DIR": os.path.join(work, "spool"),
               "AWS_SHARED_CREDENTIALS_FILE": os.path.join(work, "none"),
               "AWS_CONFIG_FILE": os.path.join(work, "none")}
        os.environ.update(env)
        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=key,
                     aws_secret_access_key=secret,
                     region_name="us-east-1").create_bucket(Bucket=BUCKET)
        g = torch.Generator().manual_seed(0)
        batches = [(torch.rand(64, 784, generator=g), torch.randint(0, 10, (64,), generator=g))
                   for _ in range(16)]
        med = {"local": [], "s3": []}
        delays = []
        for r in range(args.rounds):
            order = ["local", "s3"] if r % 2 == 0 else ["s3", "local"]
            for kind in order:
                if kind == "local":
                    d = os.path.join(work, f"local-{r}")
                    med["local"].append(one_round(d, args.steps, batches))
                    shutil.rmtree(d, ignore_errors=True)
                    continue
                url = f"s3://{BUCKET}/run-{r}"
                until = os.path.join(work, f"until-{r}")
                seen_file = os.path.join(work, f"seen-{r}.json")
                poller = subprocess.Popen([sys.executable, "-c", POLLER, url, until, seen_file])
                time.sleep(0.5)
                med["s3"].append(one_round(url, args.steps, batches))
                time.sleep(2.5)  # the last steps' upload
                open(until, "w").close()
                poller.wait(60)
                for now_us, end_us in json.load(open(seen_file)):
                    delays.append((now_us - end_us) / 1e6)
        ratio = statistics.median(med["s3"]) / statistics.median(med["local"])
        per_round = [s / l for s, l in zip(med["s3"], med["local"])]
        delays.sort()
        p = lambda q: delays[min(len(delays) - 1, int(q * len(delays)))] if delays else float("nan")
        res = {"local_ms": statistics.median(med["local"]) * 1e3,
               "s3_ms": statistics.median(med["s3"]) * 1e3, "ratio": ratio,
               "ratio_per_round": per_round, "visible_p50_s": p(0.5), "visible_p95_s": p(0.95),
               "visible_max_s": delays[-1] if delays else None, "steps_seen": len(delays)}
        print(f"default hook, anchor MLP batch 64, 1 thread, {args.rounds} rounds x "
              f"{args.steps} steps")
        print(f"  local folder  {res['local_ms']:.3f} ms/step")
        print(f"  s3:// (moto)  {res['s3_ms']:.3f} ms/step   ratio {ratio:.4f} "
              f"(per round {min(per_round):.3f}-{max(per_round):.3f})")
        print(f"  visible in the bucket after the step: p50 {res['visible_p50_s']:.2f} s, "
              f"p95 {res['visible_p95_s']:.2f} s, max {res['visible_max_s']:.2f} s "
              f"({len(delays)} steps)")
        if args.json:
            json.dump(res, open(args.json, "w"), indent=1)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
