"""Rules: built-in ones (evaluated by the C++ engine) and custom Python rules.

Built-in rules by name or with parameters::

    hook = ts.Hook("runs/exp1", rules=["vanishing_gradient",
                                       ts.Rule("loss_not_decreasing", num_steps=20)],
                   actions=["stop_training"])

Custom rules subclass ``ts.Rule`` and implement ``invoke_at_step(step)`` with the reader API
(``self.run`` is a ``ts.Run``). Return True (or raise ``ts.RuleFired("why")``) to fire; any
other exception sets the rule's status to Error and disables it; it never reaches training::

    class GradTooBig(ts.Rule):
        def __init__(self, limit=10.0):
            super().__init__(actions=["stop_training"])
            self.limit = limit

        def invoke_at_step(self, step):
            for name in self.run.tensor_names(collection="gradients"):
                if self.run.tensor(name).reduction(step, "l2") > self.limit:
                    raise ts.RuleFired(f"{name} l2 above {self.limit}")
            return False

A tensor missing at a step (``ts.NotFoundError``) skips that step for that rule. Custom rules
run on a background thread in the hook, or in ``ts.watch(run_dir, rules=[...])``.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from . import _core
from ._modes import Mode, NotFoundError, RuleFired

log = logging.getLogger("trainscope")


class Rule:
    """A rule instance: a built-in rule by name with parameters, or a custom rule (subclass
    overriding ``invoke_at_step``)."""

    def __init__(self, name: Optional[str] = None, *, actions: Optional[Iterable] = None,
                 min_consecutive: Optional[int] = None, id: Optional[str] = None, **params):
        self.name = name or type(self).__name__
        self.id = id or self.name
        self.params = params
        self.actions = None if actions is None else list(actions)
        self.min_consecutive = min_consecutive
        self.run = None  # ts.Run, set before invoke_at_step is first called
        self.worker: Optional[str] = None

    @property
    def is_custom(self) -> bool:
        return type(self).invoke_at_step is not Rule.invoke_at_step

    def invoke_at_step(self, step: int):
        """Custom rules: evaluate `step` (a global step of the worker); True fires."""
        raise NotImplementedError

    def to_config(self, default_actions: Optional[list] = None) -> dict:
        d = {"name": self.name, "params": {k: _param_value(v) for k, v in self.params.items()}}
        if self.id != self.name:
            d["id"] = self.id
        acts = self.actions if self.actions is not None else default_actions
        if acts:
            d["actions"] = list(acts)
        if self.min_consecutive is not None:
            d["min_consecutive"] = int(self.min_consecutive)
        return d

    def __repr__(self) -> str:
        return f"Rule({self.name!r}, {self.params!r})"


def _param_value(v):
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def _as_rule(r) -> Rule:
    if isinstance(r, Rule):
        return r
    if isinstance(r, str):
        return Rule(r)
    if isinstance(r, dict):
        d = dict(r)
        name = d.pop("name")
        params = d.pop("params", {})
        return Rule(name, **d, **params)
    raise TypeError(f"rules: expected names, ts.Rule objects or dicts, got {r!r}")


def split_rules(rules, actions) -> Tuple[List[Rule], List[Rule]]:
    """(built-in rules, custom Python rules); validates built-in ones with the engine. One rule
    (a name, a ts.Rule, a dict) may be given alone, one action likewise."""
    if isinstance(rules, (str, Rule, dict)):
        rules = [rules]
    if isinstance(actions, (str, dict)):
        actions = [actions]
    rules = [_as_rule(r) for r in rules or []]
    builtin = [r for r in rules if not r.is_custom]
    custom = [r for r in rules if r.is_custom]
    default_actions = list(actions or [])
    for r in custom:
        if r.actions is None:
            r.actions = default_actions
    for r in builtin:
        r._config = r.to_config(default_actions)
    if builtin:
        if not getattr(_core, "HAVE_RULES", False):
            raise RuntimeError("built-in rules are not available: trainscope._core was built "
                               "without the rules layer")
        _core.validate_rules_config(config_json(builtin))
    return builtin, custom


def config_json(builtin: List[Rule]) -> str:
    return json.dumps({"rules": [getattr(r, "_config", None) or r.to_config() for r in builtin]})


def required_collections(builtin: List[Rule], collections, save_interval: int) -> list:
    """Collections to add so the given rules have data (the engine says what each needs)."""
    from .collection import BUILTIN, Collection
    if not builtin:
        return []
    have = {c.name: c for c in collections}
    added: Dict[str, Collection] = {}
    for req in _core.rule_requirements(config_json(builtin)):
        interval = req["save_interval"] or None
        for name in req["collections"]:
            if name in have:
                c = have[name]
                if req["raw"] and not c.raw:
                    log.warning("trainscope: rule %s needs raw %s tensors; collection %r "
                                "saves summaries only", req["rule"], name, name)
                continue
            if name not in BUILTIN:
                continue
            if name in added:
                added[name].raw = added[name].raw or req["raw"]
                continue
            added[name] = Collection(name, save_interval=interval, raw=req["raw"])
        for i, rx in enumerate(req["regexes"]):
            cname = f"rule_{req['rule']}_{i}"
            if cname not in have and cname not in added:
                added[cname] = Collection(cname, include=rx, save_interval=interval,
                                          raw=req["raw"])
    return list(added.values())


def start_builtin_runner(run_dir: str, builtin: List[Rule], writer, streams: List[str],
                         poll_ms: int = 100):
    """In-process C++ RuleRunner: rule events into `writer`, stop_training sets a flag."""
    return _core.RuleRunner(run_dir, config_json(builtin), writer, streams=streams,
                            poll_ms=poll_ms, requested_by="hook", stop_flag=True,
                            wake_on_write=True)


class NonfiniteStop:
    """What the hook's per-step loss read does for one rule that stops training on a
    non-finite loss (exploding_tensor, dead_loss with the stop_training action): the rule's
    own selection and counting, applied to the value the clock has just read, so the loop
    stops at the step the NaN appeared instead of when the rule runner sees the record. The
    rule itself still evaluates the record and records its firing."""

    def __init__(self, rule: Rule):
        cfg = getattr(rule, "_config", None) or rule.to_config()
        p = cfg.get("params", {})
        self.rule_id = cfg.get("id", rule.name)
        self.kind = rule.name
        regex = p.get("tensor_regex")
        self._regex = re.compile(regex) if regex else None
        colls = p.get("collection_names")
        self._collections = {c.strip() for c in str(colls).split(",") if c.strip()} \
            if colls else set()
        self.only_nan = str(p.get("only_nan", "false")).lower() in ("1", "true")
        if self.kind == "dead_loss":  # num_steps saved values in a row, all non-finite
            self.need = int(p.get("num_steps", 5))
        else:
            self.need = max(1, int(cfg.get("min_consecutive", 1) or 1))
        self._runs: Dict[str, Tuple[int, int]] = {}  # name -> (last step, values in a row)

    def matches(self, name: str) -> bool:
        if self._regex is None and not self._collections:
            # exploding_tensor without a selection inspects everything; dead_loss: losses
            return self.kind != "dead_loss" or name.startswith("losses/")
        return bool((self._regex is not None and self._regex.search(name))
                    or name.split("/", 1)[0] in self._collections)

    def violated(self, name: str, value: float, step: int) -> bool:
        """Counts a non-finite value of `name` at `step`; True when the rule would fire."""
        if self.only_nan and not math.isnan(value):
            return False
        if not self.matches(name):
            return False
        last, n = self._runs.get(name, (None, 0))
        n = n + 1 if last is not None and step == last + 1 else 1
        self._runs[name] = (step, n)
        return n >= self.need


def nonfinite_stops(builtin: List[Rule]) -> List[NonfiniteStop]:
    """The rules among `builtin` that stop training on a non-finite loss."""
    out = []
    for r in builtin:
        if r.name not in ("exploding_tensor", "dead_loss"):
            continue
        cfg = getattr(r, "_config", None) or r.to_config()
        kinds = [a if isinstance(a, str) else (a or {}).get("type") for a in
                 cfg.get("actions", []) or []]
        if "stop_training" in kinds:
            out.append(NonfiniteStop(r))
    return out


class PythonRuleThread:
    """Evaluates custom Python rules on completed steps of one worker, on its own thread."""

    def __init__(self, run_dir: str, rules: List[Rule], writer, worker: Optional[str],
                 on_stop: Optional[Callable[[str], None]] = None, poll_s: float = 0.1):
        self.run_dir = run_dir
        self.rules = rules
        self.writer = writer
        self.worker = worker
        self.on_stop = on_stop
        self.poll_s = poll_s
        self._run = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._done: Dict[str, int] = {r.id: -1 for r in rules}
        self._evaluations: Dict[str, int] = {r.id: 0 for r in rules}
        self._status: Dict[str, dict] = {}
        self._disabled: set = set()
        for r in rules:
            self._set_status(r, "InProgress", -1, "evaluating")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="trainscope-rules",
                                        daemon=True)
        self._thread.start()

    def stop(self, finish: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if finish:
            self.cycle(final=True)
            self.finish()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.cycle(final=False)

    def statuses(self) -> Dict[str, dict]:
        return {k: dict(v) for k, v in self._status.items()}

    def cycle(self, final: bool) -> bool:
        """One pass: evaluates every rule on new completed steps. Returns True when the run
        has ended (all of it read)."""
        try:
            if self._run is None:
                from .reader import open_run
                self._run = open_run(self.run_dir, refresh_interval_s=0)
                for r in self.rules:
                    r.run = self._run
                    r.worker = self.worker
            self._run.refresh()
            ended = self._run.ended()
            steps = self._run.steps(worker=self.worker)
        except Exception as e:  # run not there yet
            log.debug("trainscope rules: %s", e)
            return False
        if not steps:
            return ended
        complete = steps if (final or ended) else steps[:-1]
        for r in self.rules:
            if r.id in self._disabled:
                continue
            for s in complete:
                if s <= self._done[r.id]:
                    continue
                self._done[r.id] = s
                if not self._evaluate(r, s):
                    break
        return ended

    def _evaluate(self, r: Rule, step: int) -> bool:
        try:
            out = r.invoke_at_step(step)
        except NotFoundError:
            return True  # data not at this step: skip it
        except RuleFired as f:
            self._evaluations[r.id] += 1
            self._fire(r, step, f.message, f.value, f.threshold, f.tensors)
            return True
        except Exception as e:
            self._disabled.add(r.id)
            self._set_status(r, "Error", step, f"{type(e).__name__}: {e}")
            log.warning("trainscope: custom rule %s raised at step %d (status Error): %s",
                        r.id, step, e)
            return False
        self._evaluations[r.id] += 1
        if out:
            self._fire(r, step, out if isinstance(out, str) else f"{r.id} fired at step {step}")
        return True

    def _fire(self, r: Rule, step: int, message: str, value=math.nan, threshold=math.nan,
              tensors=()) -> None:
        st = self._status[r.id]
        st["firings"] = st.get("firings", 0) + 1
        self._set_status(r, "IssuesFound", step, message or f"{r.id} fired", value, threshold,
                         tensors, firing=st["firings"])
        for a in r.actions or []:
            kind = a if isinstance(a, str) else a.get("type")
            if kind == "stop_training" and self.on_stop is not None:
                try:
                    self.on_stop(f"{r.id}: {message}")
                except Exception as e:
                    log.warning("trainscope: stop action of %s failed: %s", r.id, e)
            elif kind == "log":
                log.warning("trainscope rule %s fired at step %d: %s", r.id, step, message)

    def finish(self) -> None:
        for r in self.rules:
            if self._status[r.id]["status"] != "InProgress":
                continue
            n = self._evaluations[r.id]
            if n == 0:
                # Never evaluated: "no issues" would mislead (docs/rules.md, NoData).
                why = ("nothing was recorded" if self._done[r.id] < 0 else
                       "the data it reads was at none of the steps seen "
                       f"(up to step {self._done[r.id]})")
                self._set_status(r, "NoData", self._done[r.id], f"no data: {why}")
            else:
                self._set_status(r, "NoIssuesFound", self._done[r.id],
                                 f"no issues found in {n} evaluations")

    def _set_status(self, r: Rule, status: str, step: int, message: str, value=math.nan,
                    threshold=math.nan, tensors=(), firing: int = 0) -> None:
        prev = self._status.get(r.id, {})
        self._status[r.id] = {"rule": r.id, "type": r.name, "status": status,
                              "message": message, "last_step": step,
                              "firings": prev.get("firings", 0)}
        try:
            if self.writer is not None:
                self.writer.add_rule_event(r.id, status, step=step, mode=0,
                                           worker=self.worker or "", tensors=list(tensors),
                                           value=float(value), threshold=float(threshold),
                                           message=message, firing=firing)
        except Exception as e:
            log.debug("trainscope: rule event not written: %s", e)


def watch(run_dir: str, rules=None, actions=None, poll_ms: int = 100,
          timeout_s: Optional[float] = None, stream: Optional[str] = None) -> Dict[str, dict]:
    """Evaluates rules on a run (live or finished) until it ends; returns final statuses.

    Built-in rules run in the C++ engine, custom ones here; rule events are written into the
    run under the stream ``watch-<pid>``; stop_training writes a stop request into
    RUN/control/, which the training's hook picks up at its next step."""
    rules = rules if rules is not None else (_core.default_rule_names()
                                             if getattr(_core, "HAVE_RULES", False) else [])
    builtin, custom = split_rules(rules, actions)
    stream = stream or f"watch-{os.getpid()}"
    writer = _core.Writer(run_dir, stream)
    runner = None
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        if builtin:
            runner = _core.RuleRunner(run_dir, config_json(builtin), writer, poll_ms=poll_ms,
                                      requested_by=stream, stop_flag=False)
        py = None
        if custom:
            def stop(reason: str) -> None:
                _core.request_stop(run_dir, reason, stream)
            py = PythonRuleThread(run_dir, custom, writer, None, on_stop=stop)
        while True:
            ended = py.cycle(final=False) if py is not None else True
            done = runner.finished if runner is not None else ended
            if done and ended:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(poll_ms / 1000.0)
        out: Dict[str, dict] = {}
        if runner is not None:
            runner.stop(True)
            out.update({s["rule"]: s for s in runner.statuses()})
        if py is not None:
            py.cycle(final=True)
            py.finish()
            out.update(py.statuses())
        return out
    finally:
        writer.close()


def rule_names() -> List[str]:
    """Names of the built-in rules."""
    return list(_core.rule_names()) if getattr(_core, "HAVE_RULES", False) else []
