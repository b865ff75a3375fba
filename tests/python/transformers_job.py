"""A Hugging Face Trainer training with the trainscope callback under torchrun (two CPU
processes, gloo), for tests/python/test_integration_transformers.py.

    torchrun --standalone --nproc_per_node=2 transformers_job.py OUTDIR OUT-RANK.json --fault 8
"""
import json
import os
import pathlib
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_integration_transformers import Poison, Tokens, _args, _model  # noqa: E402

from trainscope.integrations.transformers import TrainscopeCallback  # noqa: E402


def main() -> None:
    out_root, out, fault = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[4])
    torch.set_num_threads(1)
    os.chdir(out_root)  # the run directory is rank 0's default one, shared with rank 1
    cb = TrainscopeCallback(save_interval=3, rules=["exploding_tensor"],
                            actions=["stop_training"])
    trainer = transformers.Trainer(model=_model(), args=_args(out_root, max_steps=3000),
                                   train_dataset=Tokens(2048, 0), callbacks=[Poison(fault), cb])
    trainer.train()
    with open(out.replace("RANK", str(trainer.args.process_index)), "w") as f:
        json.dump({"rank": trainer.args.process_index, "world": trainer.args.world_size,
                   "global_step": trainer.state.global_step,
                   "out_dir": os.path.abspath(cb.out_dir), "checkpoints": cb.checkpoints}, f)


if __name__ == "__main__":
    main()
