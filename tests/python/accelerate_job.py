"""A training with Hugging Face Accelerate and an explicit ts.Hook on the prepared model, for
tests/python/test_integration_accelerate.py. Run alone (one process) or under torchrun (each
process writes its own worker-<rank> stream into the one run directory).

    python accelerate_job.py RUN OUT.json [--fault STEP] [--steps N]

OUT.json (RANK in it is replaced by the process index) gets this process's {"rank", "losses": [[step, loss], ...], "stopped_at", ...}.
"""
import argparse
import json
import os

import torch

import trainscope as ts


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("out")
    p.add_argument("--fault", type=int, default=-1)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--save-interval", type=int, default=4)
    a = p.parse_args()

    from accelerate import Accelerator
    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4096, 12, generator=g)
    data = torch.utils.data.TensorDataset(x, (x[:, :4].sum(1) > 0).long())
    loader = torch.utils.data.DataLoader(data, batch_size=16)
    model, opt, loader = accelerator.prepare(model, opt, loader)

    hook = ts.Hook(out_dir=a.run, save_interval=a.save_interval,
                   rules=["exploding_tensor"], actions=["stop_training"])
    hook.register_module(model)                       # the prepared (DDP-wrapped) model
    criterion = hook.register_loss(torch.nn.CrossEntropyLoss())
    losses, stopped_at = [], None
    for step, (xb, yb) in enumerate(loader):
        if step >= a.steps:
            break
        if 0 <= a.fault <= step:
            xb = xb * float("nan")                    # the injected fault: NaN inputs
        loss = criterion(model(xb), yb)
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        losses.append([step, float(loss.detach())])
        if hook.should_stop:
            accelerator.set_trigger()                 # any process...
        if accelerator.check_trigger():               # ...and all of them leave together
            stopped_at = step
            path = os.path.join(a.run, "checkpoints", f"accelerate-step={step + 1}")
            accelerator.save_state(path)              # every process takes part
            hook.add_event("checkpoint", {"step": step + 1, "path": path, "reason": "stop",
                                          "framework": "accelerate"})
            break
    hook.close()
    with open(a.out.replace("RANK", str(accelerator.process_index)), "w") as f:
        json.dump({"rank": accelerator.process_index, "world": accelerator.num_processes,
                   "worker": hook.worker, "losses": losses, "stopped_at": stopped_at,
                   "reason": hook.stop_reason}, f)


if __name__ == "__main__":
    main()
