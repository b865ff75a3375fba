"""ConfigError and the argument checks of the hook, collections and profiler windows.

A wrong argument is a programmer error found where it is given: it raises at once, whatever
``strict`` says (``strict`` is about failures while the training runs, which never break it).
Each message names the argument, the value given and what is allowed::

    >>> import trainscope as ts
    >>> ts.Hook(save_interval=0)
    Traceback (most recent call last):
    ...
    trainscope._errors.ConfigError: Hook: save_interval=0 is not allowed; expected an integer >= 1
"""
from __future__ import annotations

import json
import operator
import os
from typing import Any, Iterable, Optional

# Steps and intervals are 64-bit in the core; 2**62 is its "never".
MAX_STEP = (1 << 62) - 1


class ConfigError(ValueError):
    """A bad argument of ``Hook``, ``Collection``, ``ProfilerConfig`` or a ``register_*`` call.

    Attributes: ``where`` (the call), ``argument`` (its name), ``value`` (what was given) and
    ``allowed`` (what would be accepted). A ``ValueError``, so ``except ValueError`` still
    catches it.
    """

    def __init__(self, where: str, argument: str, value: Any, allowed: str, why: str = ""):
        self.where = where
        self.argument = argument
        self.value = value
        self.allowed = allowed
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        msg = f"{where}: {argument}={shown} is not allowed"
        if why:
            msg += f" ({why})"
        msg += f"; expected {allowed}"
        super().__init__(msg)


def _int_range(minimum: Optional[int], maximum: int) -> str:
    if minimum is None:
        return "an integer"
    if maximum >= MAX_STEP:
        return f"an integer >= {minimum}"
    return f"an integer from {minimum} to {maximum}"


def check_int(where: str, name: str, value: Any, minimum: Optional[int] = 0,
              maximum: int = MAX_STEP, allow_none: bool = False) -> Optional[int]:
    """An int (or numpy integer) in [minimum, maximum]; bools and strings are refused."""
    allowed = _int_range(minimum, maximum) + (" or None" if allow_none else "")
    if value is None:
        if allow_none:
            return None
        raise ConfigError(where, name, value, allowed)
    if isinstance(value, bool):
        raise ConfigError(where, name, value, allowed, "a bool, not a number")
    try:
        v = operator.index(value)
    except TypeError:
        raise ConfigError(where, name, value, allowed) from None
    if (minimum is not None and v < minimum) or v > maximum:
        raise ConfigError(where, name, value, allowed)
    return v


def check_bool(where: str, name: str, value: Any) -> bool:
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # numpy.bool_
        return bool(value)
    raise ConfigError(where, name, value, "True or False")


def check_choice(where: str, name: str, value: Any, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if isinstance(value, str) and value in choices:
        return value
    raise ConfigError(where, name, value, "one of " + ", ".join(repr(c) for c in choices))


def check_str(where: str, name: str, value: Any, allow_none: bool = False,
              allow_empty: bool = True) -> Optional[str]:
    if value is None and allow_none:
        return None
    if isinstance(value, str) and (allow_empty or value):
        return value
    allowed = "a string" if allow_empty else "a non-empty string"
    raise ConfigError(where, name, value, allowed + (" or None" if allow_none else ""))


def check_path(where: str, name: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise ConfigError(where, name, value, "a path (str or os.PathLike) or None")


def check_callable(where: str, name: str, value: Any, allowed: str) -> Any:
    if callable(value):
        return value
    raise ConfigError(where, name, value, allowed)


def as_list(value: Any) -> list:
    """None, one item, or an iterable of items -> a list (a string is one item, not letters)."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        return [value]
    return list(value)


def check_hook_arguments(a: dict) -> dict:
    """Checks and normalises Hook(...)'s arguments (a dict of them by name); raises ConfigError."""
    w = "Hook"
    out = dict(a)
    out["out_dir"] = check_path(w, "out_dir", a["out_dir"])
    out["save_interval"] = check_int(w, "save_interval", a["save_interval"], minimum=1)
    out["system_monitor_interval_ms"] = check_int(
        w, "system_monitor_interval_ms", a["system_monitor_interval_ms"], minimum=0,
        maximum=3_600_000, allow_none=True) or 0
    out["stop_check_interval_ms"] = check_int(w, "stop_check_interval_ms",
                                              a["stop_check_interval_ms"], minimum=0,
                                              maximum=3_600_000)
    out["storage_budget_bytes"] = check_int(w, "storage_budget_bytes", a["storage_budget_bytes"],
                                            minimum=0, allow_none=True) or 0
    out["expected_steps"] = check_int(w, "expected_steps", a["expected_steps"], minimum=1)
    out["max_errors"] = check_int(w, "max_errors", a["max_errors"], minimum=0)
    out["device_stats"] = check_choice(w, "device_stats", a["device_stats"],
                                       ("auto", "torch", "core"))
    for name in ("raise_on_stop", "record_phases", "strict", "auto_step"):
        out[name] = check_bool(w, name, a[name])
    worker = a["worker"]
    if worker is not None and (not isinstance(worker, str) or not worker or "/" in worker
                               or worker.startswith(".")):
        raise ConfigError(w, "worker", worker,
                          "None or a stream name (non-empty, no '/', not starting with '.')")
    check_str(w, "run_name", a["run_name"])
    from ._profiler import ProfilerConfig
    if a["profiler"] is not None and not isinstance(a["profiler"], ProfilerConfig):
        raise ConfigError(w, "profiler", a["profiler"], "None or a ts.ProfilerConfig")
    if a["writer_options"] is not None and not isinstance(a["writer_options"], dict):
        raise ConfigError(w, "writer_options", a["writer_options"], "None or a dict")
    out["rules"] = _check_rules(a["rules"])
    out["actions"] = _check_actions(a["actions"])
    if out["actions"] and not out["rules"]:
        # Hook(actions=["stop_training"]) alone watches nothing: a forgotten or misspelt
        # rules= would silently turn auto-stop off.
        raise ConfigError(w, "actions", a["actions"], "rules=[...] to act on as well",
                          "actions apply to the rules given with them, and no rules are given")
    return out


def _check_rules(rules) -> list:
    from . import _core
    from . import rules as _rules
    items = as_list(rules)
    allowed = ("built-in rule names (ts.rule_names()), ts.Rule objects, custom ts.Rule "
               "subclasses or dicts, or one of them")
    for r in items:
        if isinstance(r, str):
            if getattr(_core, "HAVE_RULES", False):
                try:  # the core's message, the same as the CLI's and a config file's
                    _core.validate_rules_config(json.dumps({"rules": [r]}))
                except ValueError as e:
                    raise ConfigError("Hook", "rules", r, allowed, str(e)) from None
        elif not isinstance(r, (_rules.Rule, dict)):
            raise ConfigError("Hook", "rules", rules, allowed)
    return items


def check_action_names(where: str, actions) -> list:
    """Actions as names, dicts or ts.Rollback; an unknown name raises ConfigError with the
    core's message (the nearest name included), as `--actions` and config files do."""
    from . import _core
    from .checkpoint import is_rollback_action
    items = as_list(actions)
    allowed = ('action names ("stop_training", "log", "rollback"), action dicts or '
               "ts.Rollback, or one of them")
    for x in items:
        if not isinstance(x, (str, dict)) and not is_rollback_action(x):
            raise ConfigError(where, "actions", actions, allowed)
        if isinstance(x, str) and hasattr(_core, "action_name_error"):
            why = _core.action_name_error(x)
            if why:
                raise ConfigError(where, "actions", x, allowed, why)
    return items


def _check_actions(actions) -> list:
    return check_action_names("Hook", actions)
