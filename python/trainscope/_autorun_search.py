"""Zero-code capture, part 2: finding the model and the optimizer (loaded by _autorun.py).

Until the first optimizer step, process-wide forward hooks remember the outermost modules that
run; at that step the optimizer and the model are chosen: the model is the outermost module run
so far (or an nn.Module in ``__main__``) whose parameters the optimizer updates most, climbed
up to the module a script would register; ``--model-regex`` narrows the candidates. Like the
rest of zero-code capture, this file is loaded without importing the trainscope package.
"""
import re
import sys
import weakref

# Outermost forward calls without any optimizer step after which the search gives up (an
# inference script): the process-wide forward hooks slow every module call while they exist.
MAX_FORWARDS_WITHOUT_STEP = 20_000
# Outermost modules remembered as candidates (the first ones seen).
MAX_CANDIDATES = 32


class _ModelSearch:
    """The search of _AutoCapture (a mixin): candidates, the choice, and the optimizers."""

    def _fwd_pre(self, module, args):
        if self._depth == 0:
            self._forwards += 1
            key = id(module)
            if key not in self._candidates and len(self._candidates) < MAX_CANDIDATES:
                self._candidates[key] = weakref.ref(module)
            if self._forwards > MAX_FORWARDS_WITHOUT_STEP and self.hook is None:
                self._give_up_search()
        self._depth += 1

    def _fwd_post(self, module, args, output):
        if self._depth > 0:
            self._depth -= 1

    def _give_up_search(self) -> None:
        for h in self._fwd_handles:
            h.remove()
        self._fwd_handles.clear()
        self._candidates.clear()
        self._status = {"state": "searching",
                        "message": f"{MAX_FORWARDS_WITHOUT_STEP} forward calls without an "
                                   "optimizer step: stopped looking at forward calls"}
        self._report()

    def _modules(self):
        """Candidate models: outermost modules run so far, then nn.Modules in __main__."""
        import torch
        seen = {}
        for key, ref in self._candidates.items():
            m = ref()
            if m is not None:
                seen[key] = (m, "")
        main = sys.modules.get("__main__")
        for name, v in list(getattr(main, "__dict__", {}).items()):
            if isinstance(v, torch.nn.Module):
                if id(v) in seen:
                    seen[id(v)] = (seen[id(v)][0], name)
                else:
                    seen[id(v)] = (v, name)
        return list(seen.values())

    def _matches(self, module, var: str) -> bool:
        rx = self.model_regex
        if not rx:
            return True
        return bool(re.search(rx, type(module).__name__) or (var and re.search(rx, var)))

    def _choose(self, optimizer):
        """(model, var name, candidates) for this optimizer, or None to wait for another."""
        params = {id(p) for g in optimizer.param_groups for p in g["params"]}
        best, best_key, described = None, None, []
        for module, var in self._modules():
            own = [p for p in module.parameters()]
            overlap = sum(1 for p in own if id(p) in params)
            described.append(f"{var or type(module).__name__} ({type(module).__name__}, "
                             f"{len(own)} tensors, {overlap} stepped by this optimizer)")
            if overlap == 0 or not self._matches(module, var):
                continue
            key = (overlap, len(own))
            if best_key is None or key > best_key:
                best, best_key = (module, var), key
        if best is None and self.model_regex:
            return None, described
        if best is not None and not self.model_regex:
            best = (self._climb(best[0], params), best[1])
        return best or (None, ""), described

    @staticmethod
    def _climb(module, params: set):
        """The outermost module holding `module` that adds no parameter the optimizer does not
        step: Lightning runs `training_step`, so the module seen running is the
        LightningModule's submodule, and the whole LightningModule is what a script would
        register. Found once through the garbage collector's referrers (a parent holds its
        children in its `_modules` dict)."""
        import gc
        import torch
        cur = module
        for _ in range(8):
            parent = None
            for d in gc.get_referrers(cur):
                if not isinstance(d, dict) or not any(v is cur for v in d.values()):
                    continue
                for owner in gc.get_referrers(d):
                    if isinstance(owner, torch.nn.Module) and \
                            getattr(owner, "_modules", None) is d:
                        parent = owner
                    elif isinstance(owner, dict) and owner.get("_modules") is d:
                        # the parent's __dict__ holds the _modules dict
                        parent = next((o for o in gc.get_referrers(owner)
                                       if isinstance(o, torch.nn.Module)
                                       and getattr(o, "__dict__", None) is owner), None)
                    if parent is not None:
                        break
                if parent is not None:
                    break
            if parent is None:
                return cur
            if any(id(p) not in params for p in parent.parameters()) and \
                    all(id(p) in params for p in cur.parameters()):
                return cur  # the parent holds parameters this optimizer does not train
            if sum(1 for p in parent.parameters() if id(p) not in params) > \
                    sum(1 for p in cur.parameters() if id(p) not in params):
                return cur
            cur = parent
        return cur

    def _note_optimizer(self, optimizer) -> None:
        if all(r() is not optimizer for r in self._seen_optimizers):
            self._seen_optimizers.append(weakref.ref(optimizer))

    def _optimizers(self, stepping) -> list:
        """Optimizers known now: the one stepping, those stepped before, those in __main__."""
        import torch
        out = [stepping]
        for r in self._seen_optimizers:
            o = r()
            if o is not None and all(o is not k for k in out):
                out.append(o)
        main = sys.modules.get("__main__")
        for v in list(getattr(main, "__dict__", {}).values()):
            if isinstance(v, torch.optim.Optimizer) and all(v is not k for k in out):
                out.append(v)
        return out

    def _pick(self, stepping, final: bool = True):
        """(optimizer, (model, var), described) of the largest model an optimizer trains, or
        (None, None, described) when --model-regex matches none of them yet."""
        best, best_size, first_described = None, -1, None
        for opt in self._optimizers(stepping):
            chosen, described = self._choose(opt)
            if first_described is None:
                first_described = described
            if chosen is None or chosen[0] is None:
                continue
            size = sum(p.numel() for g in opt.param_groups for p in g["params"])
            if size > best_size:
                best, best_size = (opt, chosen, described), size
        if best is not None:
            return best
        if self.model_regex:
            return None, None, first_described or []
        if not final:  # look again when this step has run (a closure may run the model)
            self._deferred = stepping
            return None, None, first_described or []
        return stepping, (None, ""), first_described or []
