"""A small DDP training (gloo, CPU) started by tests/python/test_distributed.py under torchrun.

    python -m torch.distributed.run --standalone --nproc_per_node 2 dist_job.py \
        --scenario nan --out DIR --trials 5

Scenarios:
  nan        each trial is a fresh Hook (a run dir DIR/trial-<i>) with exploding_tensor +
             stop_training; rank 1 alone makes its loss NaN at a step only it knows (its
             gradients stay finite, so no other rank sees NaN). Every rank breaks out of its loop
             when hook.should_stop says so and writes DIR/trial-<i>/exit-<rank>.json; the next
             trial's DDP all-reduces hang if any rank left at another step.
  stopfile   as nan, but the stop comes from control/stop.json written by rank 0's own loop.
  rollback   a NaN on rank 1 only with the rollback action: every rank restores the same
             checkpoint (the newest that all have) at the same step and goes on.
  rank0only  a hook on rank 0 only: stops stay local (said once), nothing waits for rank 1.
  hang       rank 1 blocked in its loader, rank 0 in the all-reduce: stacks of both ranks.
  norms      gradients of an FSDP2 and a DDP model, and clip_grad_norm_'s global norms; then the
             same for FSDP1 (FullyShardedDataParallel), use_orig_params True and False.
  bench      median step time with coordinated stops on and off (DIR/bench-<rank>.json).
  killrank   rank 1 SIGKILLs itself at step --kill-at: its stream is left unclosed (a dead rank).
  straggler  a run dir DIR/<case> per case of --cases: rank --slow-rank slowed by --slow-ms in
             its data loader (data), in its model's forward (compute), or not at all (none);
             --no-optimizer: the README's usage, no register_optimizer.
  naninput   the README's usage; rank 1's input turns infinite at step --inject; every rank
             must leave at that step (or the next) and keep only finite checkpoints.
"""
import argparse
import json
import os
import random
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import trainscope as ts  # noqa: E402

torch.set_num_threads(1)


class Crit(torch.nn.Module):
    """MSE whose value (not its gradient) becomes NaN at the steps in ``nan_at``."""

    def __init__(self):
        super().__init__()
        self.nan_at = set()
        self.calls = 0

    def forward(self, out, y):
        loss = torch.nn.functional.mse_loss(out, y)
        self.calls += 1
        if self.calls in self.nan_at:
            loss = loss + torch.tensor(float("nan"))  # a constant: backward stays finite
        return loss


def batches(n, seed, slow_ms=0.0):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        if slow_ms:
            time.sleep(slow_ms / 1000)
        yield torch.randn(16, 32, generator=g), torch.randn(16, 4, generator=g)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def registered(model, crit, opt, **hook_args):
    """A Hook with `model`, `crit` and `opt` registered."""
    hook = ts.Hook(**hook_args)
    hook.register_module(model)
    hook.register_loss(crit)
    hook.register_optimizer(opt)
    return hook


def train_step(model, crit, opt, x, y, step_ms=0.0):
    loss = crit(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step_ms:
        time.sleep(step_ms / 1000)


def stop_trials(args, rank):
    ddp = torch.nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    rnd = random.Random(1000 + rank)
    for trial in range(args.trials):
        out = os.path.join(args.out, f"trial-{trial}")
        crit = Crit()
        inject = rnd.randint(20, 60)
        if rank == 1 and args.scenario == "nan":
            crit.nan_at = {inject}
        rules = [ts.Rule("exploding_tensor", actions=["stop_training"])]
        hook = registered(ddp, crit, opt, out_dir=out, save_interval=1, collections=["losses"],
                          rules=rules, system_monitor_interval_ms=0)
        stopped_at = None
        t0 = time.monotonic()
        for i, (x, y) in enumerate(hook.wrap(batches(args.max_steps, trial))):
            train_step(ddp, crit, opt, x, y, args.step_ms)
            if args.scenario == "stopfile" and rank == 0 and i == inject:
                os.makedirs(os.path.join(out, "control"), exist_ok=True)
                with open(os.path.join(out, "control", "stop.json.tmp"), "w") as f:
                    json.dump({"reason": "test stop", "requested_by": "dist_job"}, f)
                os.replace(os.path.join(out, "control", "stop.json.tmp"),
                           os.path.join(out, "control", "stop.json"))
            if hook.should_stop:
                stopped_at = hook.step_count
                break
        elapsed = time.monotonic() - t0
        d = hook._dist.stats() if hook._dist is not None else None
        steps = hook.step_count
        reason = hook.stop_reason
        hook.close()
        with open(os.path.join(out, f"exit-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "stopped_at": stopped_at, "steps": steps,
                       "reason": reason, "inject": inject if rank == 1 else None,
                       "elapsed_s": elapsed, "sync": d}, f)
    dist.barrier()


def rollback_trials(args, rank):
    """Rank 1's loss is NaN at one step; exploding_tensor with the rollback action on every rank,
    a Checkpointer per rank (DIR/trial-<i>/ckpt-<rank>). Trial 0: both ranks checkpoint every 5
    TRAIN steps. Trial 1: both every 2, but after step 8 rank 0 keeps only the steps = 2 mod 4
    and rank 1 only those = 0 mod 4 (as if their other commits had failed), so their newest
    checkpoints always differ and the newest one both have is step 8. Trial 2: rank 0 has no
    Checkpointer, so nobody can roll back with rank 1: both stop together. The loop runs the
    same --max-steps batches on every rank (or stops); each rank writes its parameters."""
    for trial in range(3):
        out = os.path.join(args.out, f"trial-{trial}")
        ddp = torch.nn.parallel.DistributedDataParallel(make_model())
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        crit = Crit()
        inject = 30 + 7 * trial
        if rank == 1:
            crit.nan_at = {inject}
        hook = registered(ddp, crit, opt, out_dir=out, save_interval=1, collections=["losses"],
                          rules=[ts.Rule("exploding_tensor", actions=["rollback"])],
                          system_monitor_interval_ms=0)
        ckpt = None if trial == 2 and rank == 0 else ts.Checkpointer(
            os.path.join(out, f"ckpt-{rank}"), ddp, opt, hook=hook,
            every_steps=5 if trial == 0 else 2, keep_last=100, handle_preemption=False)
        keep = 2 if rank == 0 else 0
        for x, y in hook.wrap(batches(args.max_steps, 100 * trial + rank)):
            train_step(ddp, crit, opt, x, y, args.step_ms)
            if trial == 1:
                for c in ckpt.checkpoints():
                    if c["step"] > 8 and c["step"] % 4 != keep:
                        ts.checkpoint.delete_checkpoint(c)
            if hook.should_stop:
                break
        d = hook._dist.stats() if hook._dist is not None else None
        res = {"rank": rank, "steps": hook.step_count, "reason": hook.stop_reason, "sync": d,
               "rollbacks": ckpt.stats()["rollbacks"] if ckpt is not None else None,
               "lr": opt.param_groups[0]["lr"],
               "params": torch.cat([p.detach().flatten() for p in ddp.parameters()]).tolist()}
        if ckpt is not None:
            ckpt.close()
        hook.close()
        with open(os.path.join(out, f"exit-{rank}.json"), "w") as f:
            json.dump(res, f)
    dist.barrier()


def rank0_only(args, rank):
    """A hook on rank 0 only (no DDP): its stops stay local, and nothing waits for rank 1."""
    if rank == 0:
        model = make_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        crit = Crit()
        crit.nan_at = {30}
        hook = ts.Hook(out_dir=args.out, save_interval=1, collections=["losses"],
                       rules=[ts.Rule("exploding_tensor", actions=["stop_training"])],
                       system_monitor_interval_ms=0)
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
        for x, y in hook.wrap(batches(args.max_steps, 0)):
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(args.step_ms / 1000)
            if hook.should_stop:
                break
        with open(os.path.join(args.out, "exit-0.json"), "w") as f:
            json.dump({"steps": hook.step_count, "reason": hook.stop_reason,
                       "sync": hook._dist.stats() if hook._dist is not None else None}, f)
        hook.close()
    dist.barrier()


class SlowLayer(torch.nn.Module):
    """Identity that spins for ``ms`` in its forward (compute made slow on one rank)."""

    def __init__(self):
        super().__init__()
        self.ms = 0.0

    def forward(self, x):
        if self.ms:
            t = time.perf_counter() + self.ms / 1000
            while time.perf_counter() < t:
                pass
        return x


def straggler(args, rank):
    """One run dir per case in --cases (data, compute, none): rank --slow-rank slowed in its
    data loader, in its model's forward, or not at all, for --max-steps steps each."""
    slow_layer = SlowLayer()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), slow_layer, torch.nn.ReLU(),
                                torch.nn.Linear(64, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    slow = rank == args.slow_rank
    for case in args.cases.split(","):
        hook = ts.Hook(out_dir=os.path.join(args.out, case), save_interval=1000,
                       system_monitor_interval_ms=0,
                       rules=[ts.Rule("straggler")] if args.rules else None)
        hook.register_module(ddp)
        hook.register_loss(crit)
        if not args.no_optimizer:  # the README's three lines register no optimizer
            hook.register_optimizer(opt)
        data_ms = args.slow_ms if slow and case == "data" else 0.0
        slow_layer.ms = args.slow_ms if slow and case == "compute" else 0.0
        for x, y in hook.wrap(batches(args.max_steps, 0, data_ms)):
            loss = crit(ddp(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if args.step_ms:
                time.sleep(args.step_ms / 1000)
        hook.close()
    dist.barrier()


def nan_input(args, rank):
    """The README's usage (register_module, register_loss, no register_optimizer) with
    exploding_tensor + stop_training and a Checkpointer every 10 steps: rank 1's input turns
    infinite at TRAIN step --inject (so its loss and gradients are non-finite); every rank
    breaks out when hook.should_stop says so and writes DIR/exit-<rank>.json."""
    ddp = torch.nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    hook = ts.Hook(out_dir=args.out, system_monitor_interval_ms=0,
                   rules=[ts.Rule("exploding_tensor", actions=["stop_training"])])
    hook.register_module(ddp)
    hook.register_loss(crit)
    ckpt = ts.Checkpointer(os.path.join(args.out, f"ckpt-{rank}"), ddp, opt, hook=hook,
                           every_steps=10, keep_last=100, handle_preemption=False)
    stopped_at = None
    for i, (x, y) in enumerate(hook.wrap(batches(args.max_steps, rank))):
        if rank == 1 and i == args.inject:
            x = x * float("inf")
        train_step(ddp, crit, opt, x, y, args.step_ms)
        if hook.should_stop:
            stopped_at = i
            break
    res = {"rank": rank, "stopped_at": stopped_at, "reason": hook.stop_reason,
           "checkpoints": [c["step"] for c in ckpt.checkpoints()]}
    ckpt.close()
    hook.close()
    with open(os.path.join(args.out, f"exit-{rank}.json"), "w") as f:
        json.dump(res, f)
    dist.barrier()


def kill_rank(args, rank):
    """Rank 1 SIGKILLs itself at step --kill-at of --max-steps (nothing of Python runs after:
    no atexit, no Hook.close); rank 0 trains on until the launcher ends it."""
    ddp = torch.nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    hook = registered(ddp, crit, opt, out_dir=args.out, system_monitor_interval_ms=0)
    for i, (x, y) in enumerate(hook.wrap(batches(args.max_steps, rank))):
        if rank == 1 and i == args.kill_at:
            os.kill(os.getpid(), 9)
        train_step(ddp, crit, opt, x, y, args.step_ms)
    hook.close()


def bench(args, rank):
    """Step time with coordinated stops on and off, alternating (--trials pairs of
    --max-steps steps each), and the coordinator's own cost; DIR/bench-<rank>.json."""
    ddp = torch.nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    res = {"on": [], "off": [], "rounds": [], "round_us": [], "round_max_us": [],
           "interval": []}
    for trial in range(2 * args.trials):
        on = trial % 2 == 0
        os.environ["TRAINSCOPE_DISTRIBUTED"] = "1" if on else "0"
        hook = ts.Hook(out_dir=os.path.join(args.out, f"b{trial}"), system_monitor_interval_ms=0)
        hook.register_module(ddp)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
        times = []
        for i, (x, y) in enumerate(hook.wrap(batches(args.max_steps, trial))):
            t0 = time.perf_counter()
            loss = crit(ddp(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if args.step_ms:
                time.sleep(args.step_ms / 1000)
            if hook.should_stop:
                break
            times.append(time.perf_counter() - t0)
        times.sort()
        res["on" if on else "off"].append(times[len(times) // 2] * 1e6)
        if on and hook._dist is not None:
            st = hook._dist.stats()
            res["rounds"].append(st["rounds"])
            res["round_us"].append(st["sync_ns_total"] / max(1, st["rounds"]) / 1000)
            res["round_max_us"].append(st["sync_ns_max"] / 1000)
            res["interval"].append(st["interval_steps"])
        hook.close()
    with open(os.path.join(args.out, f"bench-{rank}.json"), "w") as f:
        json.dump(res, f)
    dist.barrier()


def hang(args, rank):
    """Rank 1 blocks in its data loader at step 20 (until DIR/release exists); rank 0 goes on
    into the next DDP backward and blocks in its gradient all-reduce. stalled_training_loop
    (threshold 2 s) fires and every rank's stacks land in DIR/stacks/."""
    ddp = torch.nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    release = os.path.join(args.out, "release")

    def blocking_loader(n):
        for i, b in enumerate(batches(n, 0)):
            if rank == 1 and i == 20:
                t = time.monotonic() + 90
                # os.access, not os.path.exists: a C function, so a stack captured while the
                # loop checks still has blocking_loader as its innermost Python frame
                while not os.access(release, os.F_OK) and time.monotonic() < t:
                    time.sleep(0.05)  # "stuck": a hung storage read, a dead worker...
            yield b

    hook = ts.Hook(out_dir=args.out, save_interval=1, collections=["losses"],
                   system_monitor_interval_ms=0,
                   rules=[ts.Rule("stalled_training_loop", threshold=2)])
    hook.register_module(ddp)
    hook.register_loss(crit)
    hook.register_optimizer(opt)
    for x, y in hook.wrap(blocking_loader(args.max_steps)):
        loss = crit(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(args.step_ms / 1000)
    hook.close()
    dist.barrier()


def fsdp1_norms(args, rank):
    """The gradients and weights of a FSDP1 (FullyShardedDataParallel) model, nested units,
    use_orig_params True and False, 3 steps each, into DIR/fsdp1-<orig>, with FSDP1's global
    norms (model.clip_grad_norm_) and the full parameters' l2 in DIR/fsdp1-<orig>-<rank>.json."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    for orig in (True, False):
        model = make_model()
        model[2] = FSDP(model[2], use_orig_params=orig, device_id=torch.device("cpu"))
        model = FSDP(model, use_orig_params=orig, device_id=torch.device("cpu"))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        crit = torch.nn.MSELoss()
        out = os.path.join(args.out, f"fsdp1-{orig}")
        hook = registered(model, crit, opt, out_dir=out, save_interval=1,
                          collections=["losses", "gradients", "weights"],
                          system_monitor_interval_ms=0)
        res = {"norms": [], "local": [], "weights": []}
        for x, y in hook.wrap(batches(3, rank)):
            with FSDP.summon_full_params(model):  # the full weights, before this step's update
                res["weights"].append({n: float(p.detach().norm()) for n, p in
                                       model.named_parameters()})
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            res["local"].append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)))
            res["norms"].append(float(model.clip_grad_norm_(1e9)))
            opt.step()
        hook.close()
        with open(os.path.join(args.out, f"fsdp1-{orig}-{rank}.json"), "w") as f:
            json.dump(res, f)
    dist.barrier()


def norms(args, rank):
    """The gradients of an FSDP2 (fully_shard) model and of a DDP model, 3 steps each, into
    DIR/fsdp and DIR/ddp, with clip_grad_norm_'s global norms in DIR/<kind>-norms-<rank>.json."""
    from torch.distributed.fsdp import fully_shard
    for kind in ("fsdp", "ddp"):
        model = make_model()
        if kind == "fsdp":
            for m in model:
                if isinstance(m, torch.nn.Linear):
                    fully_shard(m)
            fully_shard(model)
        else:
            model = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        crit = torch.nn.MSELoss()
        hook = ts.Hook(out_dir=os.path.join(args.out, kind), save_interval=1,
                       collections=["losses", "gradients"], system_monitor_interval_ms=0)
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
        out = []
        for x, y in hook.wrap(batches(3, rank)):  # each rank its own data
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            n = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
            out.append(float(n.full_tensor() if hasattr(n, "full_tensor") else n))
            opt.step()
        hook.close()
        with open(os.path.join(args.out, f"{kind}-norms-{rank}.json"), "w") as f:
            json.dump(out, f)
    dist.barrier()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scenario", default="nan")
    p.add_argument("--out", required=True)
    p.add_argument("--trials", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=400)
    p.add_argument("--step-ms", type=float, default=2.0)
    p.add_argument("--cases", default="data,compute,none")
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--slow-ms", type=float, default=20.0)
    p.add_argument("--rules", action="store_true")
    p.add_argument("--no-optimizer", action="store_true")
    p.add_argument("--inject", type=int, default=60)
    p.add_argument("--kill-at", type=int, default=60)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    try:
        if args.scenario in ("nan", "stopfile"):
            stop_trials(args, rank)
        elif args.scenario == "rollback":
            rollback_trials(args, rank)
        elif args.scenario == "hang":
            hang(args, rank)
        elif args.scenario == "norms":
            norms(args, rank)
            fsdp1_norms(args, rank)
        elif args.scenario == "bench":
            bench(args, rank)
        elif args.scenario == "naninput":
            nan_input(args, rank)
        elif args.scenario == "killrank":
            kill_rank(args, rank)
        elif args.scenario == "rank0only":
            rank0_only(args, rank)
        else:
            straggler(args, rank)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
