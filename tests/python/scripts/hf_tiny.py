"""A Hugging Face Trainer training (tiny random BERT, made-up data, no download) for the
zero-code tests: with --callback it uses trainscope's callback, else nothing of trainscope.

    python hf_tiny.py OUTDIR [--callback] [--fault STEP] [--steps N]
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--callback", action="store_true")
p.add_argument("--fault", type=int, default=-1, help="1-based step whose weights turn NaN")
p.add_argument("--steps", type=int, default=40)
a = p.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
ids = torch.randint(1, 40, (512, 12), generator=g)
labels = (ids == 7).any(1).long()


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return len(ids)

    def __getitem__(self, i):
        return {"input_ids": ids[i], "attention_mask": torch.ones(12, dtype=torch.long),
                "labels": labels[i]}


class Poison(transformers.TrainerCallback):
    def on_step_begin(self, args, state, control, model=None, **kw):
        if state.global_step + 1 == a.fault:
            with torch.no_grad():
                model.classifier.weight.mul_(float("nan"))


config = transformers.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=32,
                                 max_position_embeddings=16, num_labels=2)
callbacks = [Poison()]
if a.callback:
    from trainscope.integrations.transformers import TrainscopeCallback
    callbacks.append(TrainscopeCallback(save_interval=5, rules=["exploding_tensor"],
                                        actions=["stop_training"]))
args = transformers.TrainingArguments(
    output_dir=a.out, use_cpu=True, report_to="none", per_device_train_batch_size=8,
    learning_rate=1e-3, logging_steps=1, save_strategy="no", disable_tqdm=True,
    dataloader_num_workers=0, seed=0, max_steps=a.steps)
trainer = transformers.Trainer(model=transformers.BertForSequenceClassification(config),
                               args=args, train_dataset=Tokens(), callbacks=callbacks)
trainer.train()
with open(os.path.join(a.out, "losses.json"), "w") as f:
    json.dump([h["loss"] for h in trainer.state.log_history if "loss" in h], f)
print("finished", trainer.state.global_step, flush=True)
