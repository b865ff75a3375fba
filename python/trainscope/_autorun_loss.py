"""Zero-code capture, part 3: the loss (loaded by _autorun.py).

The loss is the one-element tensor on which ``backward()`` is called (``torch.autograd.backward``
is wrapped); under a ``GradScaler`` the unscaled loss that ``scaler.scale()`` was given. The
losses of a step are handed to the hook at the primary optimizer's step, with a gradient
accumulation's ``loss / n`` undone. Loaded without importing the trainscope package.
"""
import time
import weakref


class _LossCapture:
    """The loss capture of _AutoCapture (a mixin)."""

    def _wrap_backward(self, orig):
        auto = self

        def backward(tensors, *args, **kwargs):
            if not auto.done:
                try:
                    auto._on_backward(tensors)
                except Exception as e:  # noqa: BLE001
                    auto._fail("reading the loss", e)
            return orig(tensors, *args, **kwargs)
        backward.__wrapped__ = orig
        backward.__doc__ = orig.__doc__
        return backward

    def _on_backward(self, tensors) -> None:
        t = tensors
        if isinstance(t, (list, tuple)):
            if len(t) != 1:
                return
            t = t[0]
        if getattr(t, "numel", None) is None or t.numel() != 1 or not t.requires_grad:
            return
        hook = self.hook
        if hook is not None:  # backward_us runs from here to optimizer.step()
            hook._clock.mark_backward_start(time.perf_counter_ns())
        sc = self._scaled
        if sc is not None and sc[1] == id(t):
            scaler = sc[0]()
            t = sc[2]
            self._scaled = None
            if scaler is not None and self._scaler is None:
                self._scaler_seen = scaler
        fn = t.grad_fn
        scale = None  # (node name, the constant), read now: backward frees saved tensors
        if fn is not None and fn.__class__.__name__ in _SCALE_NODES:
            try:
                scale = (fn.__class__.__name__, fn._saved_other)
            except Exception:  # noqa: BLE001 - nothing saved
                scale = None
        self._pending.append((t.detach(), scale))
        if len(self._pending) > 64:  # backward without optimizer steps: keep the newest
            del self._pending[:-64]

    def _wrap_scale(self, orig):
        auto = self

        def scale(scaler, outputs):
            out = orig(scaler, outputs)
            try:
                if not auto.done and getattr(outputs, "numel", None) is not None \
                        and outputs.numel() == 1:
                    auto._scaled = (weakref.ref(scaler), id(out), outputs)
            except Exception:  # noqa: BLE001
                pass
            return out
        scale.__wrapped__ = orig
        scale.__doc__ = orig.__doc__
        return scale

    _scaler_seen = None

    def _feed_losses(self) -> None:
        hook = self.hook
        if hook is None or not self._pending:
            return
        pending, self._pending = self._pending, []
        n = len(pending)
        for t, scale in pending:
            if n > 1 and scale is not None:
                t = _undo_accumulation_scale(t, scale, n)
            self._on_loss(t)


_SCALE_NODES = ("DivBackward0", "MulBackward0")


def _undo_accumulation_scale(t, scale, n: int):
    """Gradient accumulation over n backward calls usually calls ``(loss / n).backward()``
    (or ``loss * (1 / n)``): the loss is then the value before that division, the one the
    script computes and prints. Any other scaling is left as it is."""
    node, other = scale
    try:
        if not other.is_cpu or other.numel() != 1:  # reading it would wait for the device
            return t
        other = float(other)
    except Exception:  # noqa: BLE001
        return t
    if node == "DivBackward0" and other == n:
        return t * n
    if node == "MulBackward0" and abs(other * n - 1.0) < 1e-6:
        return t * n
    return t
