"""How the hook writes what it captured: batched CPU summaries (one core call), the device table
and device scalars (copied to the host without waiting), scalars, and the commit of the step
records to the writer thread; the bytes written are accounted in the hook's StorageAccount
(_storage.py).
"""
from __future__ import annotations

import functools
from typing import Any, Dict

from . import _core
from ._capture import _is_dtensor
from ._dtypes import _torch_codes, torch_to_buffer
from ._modes import Mode
from ._step_clock import COUNTER_MODE_STEPS, MODES, _now_us
from ._storage import SUMMARY_BYTES


# Scalars the hook records besides losses (docs/python.md). The amp ones are named in
# src/rules/builtin/amp_scalars.h (the rules read them).
AMP_LOSS_SCALE = _core.AMP_LOSS_SCALE
AMP_SKIPPED = _core.AMP_SKIPPED
GRAD_NORM_TOTAL = "grad_norm/total"


class Saving:
    """Batches, device copies, scalars, commits and storage accounting (a mixin of Hook)."""

    # =============================================================================== saving
    def _save_items(self, items) -> None:
        """Queues tensors: CPU ones for one batched core call, others for the device batch."""
        if not items or not self._saving:
            return
        cpu_summaries = self.device_stats != "torch"
        cpu_batch = self._cpu_batch
        summary_bytes = self._unaccounted  # accounted at the next _flush_batches
        for full, t, (raw, red, buckets), coll in items:
            if _is_dtensor(t):
                # FSDP2 / tensor-parallel shards: this rank's shard, under the full name (a
                # DTensor's numel and data_ptr describe different tensors: never read in place)
                t = t.to_local()
            on_cpu = getattr(t, "is_cpu", True)
            if red:
                summary_bytes[coll] = summary_bytes.get(coll, 0) + SUMMARY_BYTES
                if on_cpu and cpu_summaries:
                    cpu_batch.append((full, t, buckets))
                else:
                    if self._device_batch is None:
                        from ._device_stats import DeviceBatch
                        self._device_batch = DeviceBatch()
                    code = torch_to_buffer_code(t)
                    self._device_batch.add(full, t, code)
            if raw and not self._storage.raw_disabled:
                tc = t.detach()
                if not on_cpu:
                    tc = tc.to("cpu")
                arr, code, shape = torch_to_buffer(tc)
                self._flush_pending()  # keep records in step order
                self._writer.add_raw(full, self.step_count, int(self.mode),
                                     self._mode_steps[self.mode], arr, code, list(shape))
                self._account(coll, arr.nbytes)  # now: may switch raw saving off

    def _flush_batches(self, device: bool = True) -> None:
        """Writes queued CPU summaries (one core call) and, with device=True, the device
        table (one device-to-host copy, together with pending device losses)."""
        w = self._writer
        if self._unaccounted:
            self._account_pending()
        if w is None:
            self._cpu_batch = []
            return
        b = self._device_batch
        if not self._cpu_batch and not (device and b is not None and len(b)):
            return
        self._flush_pending()  # keep the records in step order
        clock = self._clock
        step, mode = clock.step, clock.mode
        ms = clock.get(COUNTER_MODE_STEPS, mode)
        if self._cpu_batch:
            batch, self._cpu_batch = self._cpu_batch, []
            # Contiguous tensors of known dtypes are read in place by the core (one call; no
            # numpy array per tensor); it hands back the others.
            rest = w.add_summaries_batch(batch, step, mode, ms, _torch_codes())
            groups: Dict[int, tuple] = {}  # buckets -> names, arrays, codes, shapes (numpy)
            for i in rest:
                full, t, buckets = batch[i]
                arr, code, shape = torch_to_buffer(t)  # other dtypes, non-contiguous
                g = groups.setdefault(buckets, ([], [], [], []))
                g[0].append(full)
                g[1].append(arr)
                g[2].append(code)
                g[3].append(shape)
            for buckets, (names, arrs, codes, shapes) in groups.items():
                w.add_summaries(names, step, mode, ms, arrs, codes, shapes, buckets)
            del batch
        if device and b is not None and len(b):
            try:
                self._take_dev_losses()
                scalars, self._device_scalars = self._device_scalars, []
                pending = b.copy_with_scalars([v for _, v, _, _, _ in scalars])
                self._host_copies.append((pending, functools.partial(
                    self._write_table, b.names, step, mode, ms, b.dtypes,
                    [list(s) for s in b.shapes], scalars)))
            finally:
                b.clear()
            self._drain_host_copies()

    def _write_table(self, names, step, mode, ms, dtypes, shapes, scalars, result) -> None:
        self._writer.add_summary_table(names, step, mode, ms, dtypes, shapes, result[0])
        self._write_device_scalars(scalars, result)

    def _drain_host_copies(self, wait: bool = False) -> None:
        """Writes the device copies that have landed (all of them with wait=True), oldest
        first, stopping at the first still in flight."""
        q = self._host_copies
        while q and (wait or q[0][0].ready()):
            pending, write = q.popleft()
            try:
                if self._writer is not None:
                    write(pending.result())
            except Exception as e:
                self._fail("device copy", e)

    # Records from this thread are staged in the core (Writer.staging) and handed to the
    # writer thread in bursts by a committer thread every commit_interval_ms (and at
    # flush/close): waking an idle writer thread for every step's first record costs far
    # more than the record itself on a busy machine.
    # Records of every step (StepRecord, the loss) wait in the clock and are handed to the
    # core in bursts (at the commit cadence, before other records, at flush/close): one
    # burst runs with warm caches, where one call per step found them cold after the
    # model's forward and backward and cost several times more. Training thread only.
    # With in-process built-in rules (flush_on_commit) the committer also writes the burst and
    # evaluates the rules on it itself (Runtime.commit_and_evaluate): a firing's stop is set
    # before it returns, with no wake-up of the writer's or the rules' thread in between, each
    # of which waits for a core's time slice (milliseconds) when the training holds them all.
    def _commit_loop(self) -> None:
        w = self._writer
        rt = self._runtime
        commit = rt.commit_and_evaluate if rt is not None and w.flush_on_commit else w.commit
        try:
            while not self._committer_stop.wait(self._commit_interval_s):
                try:
                    commit()  # releases the GIL
                except Exception:
                    return
                self._poll_stop()  # a rule's stop action, `trainscope stop`, the dashboard
        finally:
            self._committing = False  # the training thread commits and polls from now on

    def _commit(self) -> None:
        """Hands everything recorded so far to the writer thread (one wake-up)."""
        self._flush_pending()
        w = self._writer
        if w is not None:
            w.commit()

    def _flush_pending(self) -> None:
        self._clock.flush_pending()
        if self._comm_timing is not None and self._writer is not None:
            self._comm_timing.flush(self._writer, self.step_count)  # after its step records

    def _flush_device_scalars(self) -> None:
        """Starts the copy of the queued device losses (one per device, not waiting)."""
        self._take_dev_losses()
        if not self._device_scalars:
            return
        pending, self._device_scalars = self._device_scalars, []
        from ._device_stats import PendingTable
        by_dev: Dict[Any, list] = {}
        for item in pending:
            by_dev.setdefault(item[1].device, []).append(item)
        for _, items in by_dev.items():
            copy = PendingTable([], [v for _, v, _, _, _ in items])
            self._host_copies.append((copy, functools.partial(self._write_device_scalars,
                                                              items)))
        self._drain_host_copies()

    def _write_device_scalars(self, items, result) -> None:
        for (name, _, step, mode, ms), v in zip(items, result[1]):
            if name.startswith("losses/"):
                if self._nonfinite_stops:  # a device loss: seen once its copy arrived
                    self._check_nonfinite(name, float(v), step)
                v = self._step_mean(name, step, mode, float(v))
            elif name == AMP_SKIPPED:  # a fused optimizer's found_inf, every step
                v = 1.0 if v > 0 else 0.0
            self._write_scalar(name, v, step, mode, ms)

    def _write_scalar(self, name: str, value, step: int, mode: Mode, ms: int) -> None:
        w = self._writer
        if w is None:
            return
        self._flush_pending()
        try:
            v = float(value)
        except TypeError:
            v = float(value.detach().float().mean())
        w.add_scalar(name, step, int(mode), ms, v)

    # ============================================================================== storage
    def _account(self, coll: str, nbytes: int) -> None:
        self._storage.add(coll, nbytes, self.step_count, self.collections, self.save_interval)

    def _account_pending(self) -> None:
        """Accounts the summary bytes queued since the last call."""
        pending_bytes, self._unaccounted = self._unaccounted, {}
        for coll, nbytes in pending_bytes.items():
            self._account(coll, nbytes)

    def _project_storage(self) -> None:
        """At registration: bytes per save of weights/biases/gradients (known shapes)."""
        sizes = {n: p.numel() * p.element_size() for n, p in self._params}
        for c in self._tensor_colls:
            t = self._targets.get(c.name) or {}
            b = 0
            for pname, _ in list(t.get("param", ())) + list(t.get("grad", ())):
                b += (SUMMARY_BYTES if c.reductions else 0) + (sizes.get(pname, 0) if c.raw else 0)
            if b and c.source in ("param", "grad"):  # sizes fully known: no need to observe
                self._storage.per_save(c.name, b)
        self._storage.check_projection(self.collections, self.save_interval)

    def _take_dev_losses(self) -> None:
        """Moves the device losses the clock kept (detached, not yet copied) to
        _device_scalars."""
        for index, value, step, mode, ms in self._clock.take_dev_losses():
            self._device_scalars.append((self._loss_names[index], value, step, MODES[mode], ms))

    def _record_grad_norm(self, norm) -> None:
        """clip_grad_norm_ returned `norm`: grad_norm/total at the current step
        (_GradNormRecorder)."""
        try:
            if self._writer is None or self._closed:
                return
            mode = self.mode
            ms, step = self._mode_steps[mode], self.step_count
            if norm.is_cpu and self.device_stats != "torch":
                self._clock.pend_scalar(GRAD_NORM_TOTAL, step, int(mode), ms, float(norm),
                                        _now_us())
            else:
                self._device_scalars.append((GRAD_NORM_TOTAL, norm.detach().reshape(()), step,
                                             mode, ms))
                self._clock.dev_scalars = True
        except Exception as e:
            self._fail("grad norm", e)

    def _step_mean(self, name: str, step: int, mode, value: float) -> float:
        """The mean of `name`'s values in (step, mode) so far, this one included: several
        calls of a criterion in one step (gradient accumulation) record their mean, as the
        clock does for CPU losses."""
        m = self._step_means.get(name)
        if m is None or m[0] != step or m[1] != int(mode):
            self._step_means[name] = [step, int(mode), value, 1]
            return value
        m[2] += value
        m[3] += 1
        return m[2] / m[3]


def torch_to_buffer_code(t) -> int:
    from ._dtypes import FLOAT64, _torch_codes
    return _torch_codes().get(t.dtype, FLOAT64)
