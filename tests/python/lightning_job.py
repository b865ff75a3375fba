"""A Lightning training with the trainscope callback and no rules of its own, for the test of
the callback under `trainscope run` (tests/python/test_integration_lightning.py): the rules
and the stop come from the launcher.

    python lightning_job.py OUT.json [--fault STEP] [--max-steps N]
    torchrun --standalone --nproc_per_node=2 lightning_job.py OUT-RANK.json --ddp --out-dir RUN
        --rules exploding_tensor        (DDP on CPU/gloo; RANK in OUT is the global rank)
"""
import argparse
import json
import time
import warnings

import torch

warnings.filterwarnings("ignore")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--fault", type=int, default=-1)
    p.add_argument("--max-steps", type=int, default=40)
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--out-dir")
    p.add_argument("--rules")
    a = p.parse_args()

    import lightning.pytorch as pl
    from trainscope.integrations.lightning import TrainscopeCallback
    torch.set_num_threads(1)

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(),
                                           torch.nn.Linear(16, 2))
            self.seen = []

        def training_step(self, batch, batch_idx):
            x, y = batch
            if 0 <= a.fault <= self.global_step:
                x = x * float("nan")
                time.sleep(0.005)  # a step of a real model's length once the fault is in
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            self.seen.append([self.global_step, float(loss.detach())])
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 12, generator=g)
    data = torch.utils.data.TensorDataset(x, (x[:, :4].sum(1) > 0).long())
    kw = {}
    if a.rules:
        kw = dict(rules=a.rules.split(","), actions=["stop_training"])
    cb = TrainscopeCallback(out_dir=a.out_dir, save_interval=5, **kw)  # None: the launcher's
    dist = dict(devices=2, strategy="ddp") if a.ddp else {}
    trainer = pl.Trainer(max_steps=a.max_steps, max_epochs=-1, callbacks=[cb],
                         accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False, **dist)
    model = Module()
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=16))
    with open(a.out.replace("RANK", str(trainer.global_rank)), "w") as f:
        json.dump({"losses": model.seen, "global_step": trainer.global_step,
                   "rank": trainer.global_rank, "world": trainer.world_size,
                   "out_dir": cb.out_dir, "checkpoints": cb.checkpoints}, f)


if __name__ == "__main__":
    main()
