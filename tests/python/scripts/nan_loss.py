"""A plain training (no trainscope in it) whose loss turns NaN at step 30 of 200: for tests that
run it under `trainscope run --rules exploding_tensor --actions stop_training` (exit 76)."""
import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(200):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    if i == 30:
        loss = loss * float("nan")
    opt.zero_grad()
    loss.backward()
    opt.step()
