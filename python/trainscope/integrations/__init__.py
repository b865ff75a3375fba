"""Framework integrations: one-line callbacks that record a training with a ts.Hook.

- ``trainscope.integrations.lightning.TrainscopeCallback``: PyTorch Lightning 2.x
  (``lightning.pytorch`` and ``pytorch_lightning``).
- ``trainscope.integrations.transformers.TrainscopeCallback``: the Hugging Face Trainer.
- Accelerate needs no callback: ``ts.Hook`` on the model ``accelerator.prepare`` returns
  (docs/integrations.md).

Each module imports its framework when imported (never before): ``import trainscope`` stays
free of them. The callbacks create their hook with ``ts.Hook(...)``, so ``trainscope run``'s
zero-code capture stands down, and under ``trainscope run`` the hook writes into the run it
monitors.
"""
