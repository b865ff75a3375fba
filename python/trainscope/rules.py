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
run in the same C++ engine as the built-in ones (a trampoline calls ``invoke_at_step`` with the
GIL held, python/bindings/python_rule.cc): the same statuses, ``min_consecutive``,
``remind_every_steps``, ``recover_after`` and actions; in the hook on its rule thread, or in
``ts.watch(run_dir, rules=[...])``. The report's words for a custom rule: the class attributes
``title``, ``severity`` ("critical", "warning", "info") and ``advice`` (default: the rule's id,
"warning" and generic advice).
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from typing import Dict, Iterable, List, Optional, Tuple

from . import _core
from ._modes import Mode, NotFoundError, RuleFired

log = logging.getLogger("trainscope")


class Rule:
    """A rule instance: a built-in rule by name with parameters, or a custom rule (subclass
    overriding ``invoke_at_step``). ``min_consecutive``, ``remind_every_steps`` and
    ``recover_after`` are the engine's firing policy (docs/rules.md), for both kinds."""

    # The report's words for a custom rule (built-in rules declare theirs in C++).
    title: Optional[str] = None
    severity: Optional[str] = None  # "critical" | "warning" | "info"
    advice: Optional[str] = None

    def __init__(self, name: Optional[str] = None, *, actions: Optional[Iterable] = None,
                 min_consecutive: Optional[int] = None, id: Optional[str] = None,
                 remind_every_steps: Optional[int] = None, recover_after: Optional[int] = None,
                 **params):
        self.name = name or type(self).__name__
        self.id = id or self.name
        self.params = params
        self.actions = None if actions is None else list(actions)
        self.min_consecutive = min_consecutive
        self.remind_every_steps = remind_every_steps
        self.recover_after = recover_after
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
            d["actions"] = _action_values(acts)
        for key in ("min_consecutive", "remind_every_steps", "recover_after"):
            if getattr(self, key) is not None:
                d[key] = int(getattr(self, key))
        return d

    def __repr__(self) -> str:
        return f"Rule({self.name!r}, {self.params!r})"


def _action_values(actions) -> list:
    """Actions as the engine's config has them: names, dicts, or objects with to_config()
    (ts.Rollback)."""
    return [a.to_config() if hasattr(a, "to_config") else a for a in actions]


_SECRET_URL_KEYS = ("url", "smtp_url")


def redact_url(url: str) -> str:
    """"https://hooks.slack.com/services/T/B/X" -> "https://hooks.slack.com/…": a webhook's
    path and query are often its secret; what the run's files and messages show (the core's
    rules::RedactUrl says the same)."""
    if not isinstance(url, str) or "://" not in url:
        return "<url>"
    scheme, rest = url.split("://", 1)
    cut = min([i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0],
              default=len(rest))
    host = rest[:cut].rsplit("@", 1)[-1]  # user:password@host
    return f"{scheme}://{host}" + ("/…" if cut < len(rest) else "")


def redact_actions(value):
    """A copy of a rules/actions configuration (names, dicts, lists) with every action URL
    redacted, for run.json and error messages. Secrets given as *_env / *_file are names
    already and stay."""
    if isinstance(value, dict):
        return {k: (redact_url(v) if k in _SECRET_URL_KEYS and isinstance(v, str)
                    else redact_actions(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_actions(v) for v in value]
    return value  # a ts.Rule shows its name and parameters only (its repr), never its actions


def _param_value(v):
    """A parameter as JSON has it, its type kept: the engine checks it against the rule's
    (docs/rules.md). JSON has no infinity or NaN: they go as "inf", "-inf" and "nan"."""
    if isinstance(v, (list, tuple)):
        return [x if isinstance(x, str) else _param_value(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if v is None or isinstance(v, (bool, int, float, str, dict)):
        return v  # a dict is refused by the engine, never turned into its text
    if type(v).__name__ in ("bool_",):  # numpy.bool_
        return bool(v)
    if hasattr(v, "__index__"):  # numpy integers
        return int(v)
    if hasattr(v, "__float__") and not isinstance(v, str):
        return _param_value(float(v))
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
    from ._errors import check_action_names
    if isinstance(rules, (str, Rule, dict)):
        rules = [rules]
    if isinstance(actions, (str, dict)):
        actions = [actions]
    check_action_names("rules", actions)
    rules = [_as_rule(r) for r in rules or []]
    builtin = [r for r in rules if not r.is_custom]
    custom = [r for r in rules if r.is_custom]
    default_actions = list(actions or [])
    for r in custom:
        if r.actions is None:
            r.actions = default_actions
    for r in builtin:
        r._config = r.to_config(default_actions)
    if (builtin or custom) and not getattr(_core, "HAVE_RULES", False):
        raise RuntimeError("rules are not available: trainscope._core was built without the "
                           "rules layer")
    if builtin:
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


def start_in_runtime(runtime, builtin: List[Rule], streams: List[str], all_streams=False,
                     poll_ms: int = 100, custom: Iterable[Rule] = ()) -> None:
    """In-process rules in the core runtime (_core.Runtime, as the C++ Session's): built-in and
    custom rules in one runner, rule events into the worker's stream, stop_training through
    the runtime's poll_stop, rollback firings in its take_rollbacks()."""
    cfg, specs = _engine_config(runtime.run_dir, builtin, list(custom))
    runtime.start_rules(json.dumps({"rules": cfg}), streams=streams, all_streams=all_streams,
                        poll_ms=poll_ms, custom_rules=specs)


def _engine_config(run_dir: str, builtin: List[Rule], custom: List[Rule]):
    """The engine's rules configuration and the custom rules' trampoline specs."""
    cfg = [getattr(r, "_config", None) or r.to_config() for r in builtin]
    runs = _SharedRun(run_dir)
    specs = []
    for r in custom:
        cfg.append(_custom_config(r))
        specs.append({"name": r.name, "id": r.id, "call": _CustomCall(r, runs),
                      "title": r.title, "severity": r.severity, "advice": r.advice})
    return cfg, specs


def _runner(run_dir: str, builtin: List[Rule], custom: List[Rule], writer, **kw):
    cfg, specs = _engine_config(run_dir, builtin, custom)
    return _core.RuleRunner(run_dir, json.dumps({"rules": cfg}), writer, custom_rules=specs, **kw)


def _custom_config(r: Rule) -> dict:
    """A custom rule's engine config: its type is registered under its name by the runner;
    the "instance" parameter picks this object."""
    d = {"name": r.name, "id": r.id, "params": {"instance": r.id}}
    if r.actions:
        d["actions"] = _action_values(r.actions)
    for key in ("min_consecutive", "remind_every_steps", "recover_after"):
        if getattr(r, key) is not None:
            d[key] = int(getattr(r, key))
    return d


class _SharedRun:
    """The ts.Run the custom rules of one runner read (opened at the first evaluation; every
    accessor refreshes, so a rule sees what the engine saw)."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self._run = None

    def get(self):
        if self._run is None:
            from .reader import open_run
            self._run = open_run(self.run_dir, refresh_interval_s=0)
        return self._run


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


class _CustomCall:
    """What the engine's trampoline (python/bindings/python_rule.cc) calls, with the GIL held,
    when a stream's step is complete: runs ``invoke_at_step`` and returns None (the data is not
    at this step: skipped), (violated, message, value, threshold, tensors), or the error text
    of an exception (the engine sets the rule's status to Error and disables it)."""

    def __init__(self, rule: Rule, runs: _SharedRun):
        self.rule = rule
        self._runs = runs

    def __call__(self, stream: str, step: int):
        r = self.rule
        try:
            if r.run is None:
                r.run = self._runs.get()
            r.worker = stream
            out = r.invoke_at_step(step)
        except NotFoundError:
            return None
        except RuleFired as f:
            return (True, f.message or f"{r.id} fired", _num(f.value), _num(f.threshold),
                    [str(t) for t in f.tensors])
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        if out:
            msg = out if isinstance(out, str) else f"{r.id} fired at step {step}"
            return (True, msg, math.nan, math.nan, [])
        return (False, "", math.nan, math.nan, [])


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


def watch(run_dir: str, rules=None, actions=None, poll_ms: int = 100,
          timeout_s: Optional[float] = None, stream: Optional[str] = None) -> Dict[str, dict]:
    """Evaluates rules on a run (live or finished) until it ends; returns final statuses.

    Built-in and custom rules run in the C++ engine; rule events are written into the run
    under the stream ``watch-<pid>``; stop_training writes a stop request into RUN/control/,
    which the training's hook picks up at its next step."""
    rules = rules if rules is not None else (_core.default_rule_names()
                                             if getattr(_core, "HAVE_RULES", False) else [])
    builtin, custom = split_rules(rules, actions)
    stream = stream or f"watch-{os.getpid()}"
    writer = _core.Writer(run_dir, stream)
    if not builtin and not custom:
        return {}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        runner = _runner(run_dir, builtin, custom, writer, poll_ms=poll_ms,
                         requested_by=stream, stop_flag=False)
        while not runner.finished:
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(poll_ms / 1000.0)
        runner.stop(True)
        return {s["rule"]: s for s in runner.statuses()}
    finally:
        writer.close()


def rule_names() -> List[str]:
    """Names of the built-in rules."""
    return list(_core.rule_names()) if getattr(_core, "HAVE_RULES", False) else []
