#include "instrument.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "util/env.h"

namespace trainscope::cli {
namespace {

// The child's first sitecustomize. It must never break the child: the interpreter's own
// sitecustomize still runs (and its errors surface as they would), and a failure to arm the
// capture is written to RUN/instrument/<pid>.json for `trainscope run` to report.
constexpr char kBootstrap[] = R"PY(# Written by `trainscope run` (zero-code capture); see docs/user-guide.md.
# Arms trainscope's automatic hook in this interpreter, then runs the interpreter's own
# sitecustomize, if there is one.
import os as _os
import sys as _sys


def _trainscope_boot():
    here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != here]
    me = _sys.modules.get("sitecustomize")
    run_dir = _os.environ.get("TRAINSCOPE_RUN_DIR", "")
    if run_dir and _os.environ.get("TRAINSCOPE_INSTRUMENT") == "1" \
            and "_trainscope_autorun" not in _sys.modules:
        try:
            import importlib.util as iu
            spec = iu.find_spec("trainscope")
            if spec is None or not spec.submodule_search_locations:
                raise ImportError("the trainscope package is not importable by " +
                                  _sys.executable + " (pip install trainscope there)")
            path = _os.path.join(list(spec.submodule_search_locations)[0], "_autorun.py")
            s = iu.spec_from_file_location("_trainscope_autorun", path)
            m = iu.module_from_spec(s)
            _sys.modules["_trainscope_autorun"] = m
            s.loader.exec_module(m)
            m.install(run_dir)
        except Exception as e:  # the training runs unmonitored and the run says why
            _sys.modules.pop("_trainscope_autorun", None)
            try:
                import json, time
                d = _os.path.join(run_dir, "instrument")
                _os.makedirs(d, exist_ok=True)
                p = _os.path.join(d, "%d.json" % _os.getpid())
                with open(p + ".tmp", "w") as f:
                    json.dump({"state": "failed", "pid": _os.getpid(), "argv": list(_sys.argv),
                               "executable": _sys.executable, "wall_us": time.time_ns() // 1000,
                               "message": "instrumentation could not be loaded: %r" % (e,)}, f)
                _os.replace(p + ".tmp", p)
            except Exception:
                pass
    _sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401 - the interpreter's own
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
        if me is not None:
            _sys.modules["sitecustomize"] = me


_trainscope_boot()
del _trainscope_boot
)PY";

std::string Absolute(const std::string& p) {
  std::error_code ec;
  auto a = std::filesystem::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

// A private folder for the bootstrap, under $TMPDIR or else /tmp, whose path can be an entry
// of PYTHONPATH (no ':'). Empty, with *why set, when none could be made.
std::string MakePrivateBootDir(std::string* why) {
  std::vector<std::string> bases;
  const char* tmpdir = std::getenv("TMPDIR");
  if (tmpdir && *tmpdir) bases.push_back(Absolute(tmpdir));
  bases.push_back("/tmp");
  for (const std::string& base : bases) {
    if (base.find(':') != std::string::npos) {
      *why += (why->empty() ? "" : "; ") + base + " holds a ':' too";
      continue;
    }
    std::string templ = base + "/trainscope-boot-XXXXXX";
    if (::mkdtemp(templ.data()) != nullptr) return templ;
    *why += (why->empty() ? "" : "; ") + std::string("cannot create a folder in ") + base +
            ": " + std::strerror(errno);
  }
  return "";
}

}  // namespace

Result<Instrumentation> PrepareInstrumentation(const InstrumentOptions& o) {
  const std::string run_dir = Absolute(o.run_dir);
  Instrumentation ins;
  Env* fs_env = Env::Default();
  if (run_dir.find(':') == std::string::npos) {
    ins.boot_dir = run_dir + "/instrument/boot";
    Status made = fs_env->CreateDirs(ins.boot_dir);
    if (!made.ok())
      return Status::IOError("cannot create " + ins.boot_dir + ": " + made.message());
  } else {
    // PYTHONPATH splits at ':': the bootstrap goes where the path has none, and the child
    // finds the run directory through TRAINSCOPE_RUN_DIR as always.
    std::string why;
    ins.boot_dir = MakePrivateBootDir(&why);
    if (ins.boot_dir.empty())
      return Status::IOError("the run directory's path holds a ':', which PYTHONPATH cannot "
                             "carry, and no other folder could take the bootstrap (" + why + ")");
    ins.temporary = true;
  }
  const std::string path = ins.boot_dir + "/sitecustomize.py";
  Status wrote = fs_env->WriteFileAtomic(path, kBootstrap);
  if (!wrote.ok()) {
    RemoveInstrumentation(ins);
    return Status::IOError("cannot write " + path + ": " + wrote.message());
  }

  std::map<std::string, std::string>& env = ins.env;
  const char* old = std::getenv("PYTHONPATH");
  env["PYTHONPATH"] = ins.boot_dir + (old && *old ? ":" + std::string(old) : "");
  env["TRAINSCOPE_INSTRUMENT"] = "1";
  if (!o.model_regex.empty()) env["TRAINSCOPE_MODEL_REGEX"] = o.model_regex;
  nlohmann::json opts = nlohmann::json::object();
  if (o.fast_stops) {
    // The rules run in `trainscope run`, reading what the child's writer flushed: flush and
    // look for stop requests as often as in-process rules would.
    opts["hook"] = {{"stop_check_interval_ms", 20},
                    {"writer_options", {{"flush_interval_ms", 20}}}};
  }
  nlohmann::json stops = nlohmann::json::array();
  for (const RuleConfig& rc : o.nonfinite_stops) {
    if (rc.type != "exploding_tensor" && rc.type != "dead_loss") continue;
    bool stop = false;
    for (const auto& a : rc.actions) stop = stop || a.type == ActionType::kStopTraining;
    if (!stop) continue;
    stops.push_back({{"name", rc.type},
                     {"id", rc.id.empty() ? rc.type : rc.id},
                     {"params", rc.params},
                     {"min_consecutive", rc.min_consecutive}});
  }
  if (!stops.empty()) opts["nonfinite_stops"] = stops;
  env["TRAINSCOPE_INSTRUMENT_OPTIONS"] = opts.dump();
  return ins;
}

void RemoveInstrumentation(const Instrumentation& ins) {
  if (!ins.temporary || ins.boot_dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(ins.boot_dir, ec);  // best effort: a folder in /tmp
}

std::vector<InstrumentStatus> ReadInstrumentStatus(const std::string& run_dir, Env* env) {
  if (env == nullptr) env = Env::Default();
  std::vector<InstrumentStatus> out;
  const std::string dir = run_dir + "/instrument";
  auto names = env->ListDir(dir);
  for (const std::string& name : names.ok() ? *names : std::vector<std::string>{}) {
    if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".json") != 0) continue;
    std::string text;  // a regular file of at most 1 MiB (the Env refuses anything else)
    if (!env->ReadFile(dir + "/" + name, &text, 1 << 20).ok()) continue;
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    InstrumentStatus s;
    s.pid = j.value("pid", int64_t{0});
    s.state = j.value("state", std::string());
    s.message = j.value("message", std::string());
    s.json = j.dump();
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

std::vector<std::string> DescribeInstrumentation(const std::vector<InstrumentStatus>& s) {
  std::vector<std::string> lines;
  bool captured = false;
  for (const auto& e : s) {
    if (e.state == "active" || e.state == "stopped" || e.state == "stood_down" ||
        e.state == "failed") {
      lines.push_back("pid " + std::to_string(e.pid) + ": " + e.message);
      captured = captured || e.state != "failed";
    }
  }
  if (!captured && lines.empty()) {
    if (s.empty()) {
      lines.push_back(
          "no Python process loaded the zero-code capture (not a Python command, an "
          "interpreter started with -I, -E or -S, or a command that set its own PYTHONPATH); "
          "only system samples were recorded");
    } else {
      for (const auto& e : s) {
        if (!e.message.empty()) lines.push_back("pid " + std::to_string(e.pid) + ": " + e.message);
      }
      lines.push_back("no optimizer step was seen: nothing but system samples was recorded");
    }
  }
  return lines;
}

}  // namespace trainscope::cli
