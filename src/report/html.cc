// RunData + RunAnalysis → one self-contained HTML page: the template and scripts embedded at
// build time (web/), the data as a JSON blob (<script type="application/json" id="ts-data">).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "report/internal.h"

namespace trainscope {
namespace {

using nlohmann::json;
using report_internal::SystemTable;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Four significant digits keep the page small; NaN becomes null (a gap in the chart).
json Round(double v) { return report_internal::Rounded(v); }

json Array(const std::vector<double>& v, double scale = 1) {
  json a = json::array();
  for (double x : v) a.push_back(Round(x * scale));
  return a;
}

struct Line {
  std::string label;
  std::vector<double> values;
  double scale = 1;
};

json LineChart(const std::string& id, const std::string& title, const std::string& x_label,
               const std::string& unit, const std::vector<double>& x, std::vector<Line> lines,
               size_t max_points) {
  std::vector<std::vector<double>> ys;
  for (auto& l : lines) ys.push_back(std::move(l.values));
  std::vector<double> dx;
  std::vector<std::vector<double>> dys;
  Downsample(x, ys, max_points, &dx, &dys);
  json series = json::array();
  for (size_t i = 0; i < lines.size(); ++i) {
    series.push_back({{"label", lines[i].label}, {"values", Array(dys[i], lines[i].scale)}});
  }
  return {{"id", id},     {"kind", "line"}, {"title", title},  {"xLabel", x_label},
          {"unit", unit}, {"x", Array(dx)}, {"series", series}};
}

// Scalars of one family ("losses/" or others) on a shared step axis (union of steps).
json ScalarChart(const std::string& id, const std::string& title,
                 const std::vector<const ScalarRecord*>& recs, size_t max_points) {
  std::set<int64_t> steps;
  std::map<std::string, std::map<int64_t, double>> by_series;
  for (const auto* r : recs) {
    std::string label = report_internal::ScalarLabel(*r);
    by_series[label][r->step] = r->value;
    steps.insert(r->step);
  }
  std::vector<double> x(steps.begin(), steps.end());
  std::vector<Line> lines;
  for (const auto& [label, vals] : by_series) {
    Line l{label, std::vector<double>(x.size(), kNaN)};
    size_t i = 0;
    for (int64_t s : steps) {
      auto it = vals.find(s);
      if (it != vals.end()) l.values[i] = it->second;
      ++i;
    }
    lines.push_back(std::move(l));
  }
  json c = LineChart(id, title, "step", "", x, std::move(lines), max_points);
  c["spanGaps"] = true;
  return c;
}

// The series of `labels` on every stream that has them, when two or more do (else empty: the
// chart shows the main stream's full data).
std::vector<report_internal::RankLine> RankLines(const std::map<std::string, StreamSeries>& streams,
                                                const std::set<std::string>& labels) {
  std::vector<report_internal::RankLine> out;
  std::set<std::string> with;
  for (const auto& label : labels) {
    for (const auto& [stream, s] : streams) {
      auto it = s.scalars.find(label);
      if (it == s.scalars.end() || it->second.empty()) continue;
      out.push_back({label, stream, &it->second});
      with.insert(stream);
    }
  }
  if (with.size() < 2) out.clear();
  return out;
}

json Curves(const RunData& d, const std::map<std::string, StreamSeries>& streams,
            const RunAnalysis& a, const RenderOptions& o) {
  // A chart's labels on every rank (RankCurve) when two or more ranks have them.
  auto chart = [&](const std::string& id, const std::string& title,
                   const std::vector<const ScalarRecord*>& recs) {
    std::set<std::string> labels;
    for (const auto* r : recs) labels.insert(report_internal::ScalarLabel(*r));
    auto lines = RankLines(streams, labels);
    if (lines.empty()) return ScalarChart(id, title, recs, o.max_points);
    return report_internal::RankCurve(id, title, "", lines, a.slowest_rank, o.max_points);
  };
  json charts = json::array();
  std::vector<const ScalarRecord*> losses;
  std::map<std::string, std::vector<const ScalarRecord*>> others;
  for (const auto& s : d.scalars) {
    if (s.name.rfind("losses/", 0) == 0) {
      losses.push_back(&s);
    } else {
      others[s.name].push_back(&s);
    }
  }
  if (!losses.empty()) charts.push_back(chart("losses", "Loss", losses));
  int n = 0;
  for (const auto& [name, recs] : others) {
    if (++n > 12) break;
    charts.push_back(chart("scalar-" + std::to_string(n), name, recs));
  }
  return charts;
}

// Per-layer gradient L2 norm over steps: rows = gradients/* tensors, columns = step buckets,
// value = log10 of the largest norm in the bucket.
json GradientHeatmap(const RunData& d, const RenderOptions& o) {
  std::map<std::string, std::vector<const TensorPoint*>> rows;
  std::vector<int64_t> steps;  // distinct steps with gradient summaries, sorted
  for (const auto& t : d.tensors) {
    if (t.name.rfind("gradients/", 0) != 0 || t.mode != Mode::kTrain) continue;
    rows[t.name].push_back(&t);
    steps.push_back(t.step);
  }
  if (rows.empty()) return nullptr;
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  // Columns are buckets of consecutive saved steps, so no column is empty by construction.
  const size_t ncols = std::min(o.heatmap_columns, steps.size());
  auto column = [&](int64_t step) {
    size_t idx = std::lower_bound(steps.begin(), steps.end(), step) - steps.begin();
    return std::min(ncols - 1, idx * ncols / steps.size());
  };
  json names = json::array(), values = json::array();
  size_t nrow = 0;
  for (const auto& [name, pts] : rows) {
    if (++nrow > o.heatmap_rows) break;
    std::vector<double> cells(ncols, kNaN);
    for (const auto* p : pts) {
      size_t c = column(p->step);
      double v = (p->nan || p->inf || !std::isfinite(p->l2))
                     ? std::numeric_limits<double>::infinity()
                     : p->l2;
      if (std::isnan(cells[c]) || v > cells[c]) cells[c] = v;
    }
    json row = json::array();
    for (double v : cells) {
      if (std::isinf(v)) {
        row.push_back("nan");
      } else {
        row.push_back(std::isnan(v) ? json(nullptr) : Round(std::log10(std::max(v, 1e-30))));
      }
    }
    names.push_back(name.substr(10));
    values.push_back(std::move(row));
  }
  json cols = json::array();
  for (size_t c = 0; c < ncols; ++c) cols.push_back(steps[c * steps.size() / ncols]);
  return {{"id", "grad-heatmap"},
          {"kind", "heatmap"},
          {"title", "Gradient L2 norm per layer (log10)"},
          {"rows", names},
          {"cols", cols},
          {"values", values},
          {"xLabel", "step"},
          {"colorLabel", "log10 ‖g‖₂"}};
}

json StepCharts(const RunData& d, const std::map<std::string, StreamSeries>& streams,
               const RunAnalysis& a, const RenderOptions& o) {
  const auto* steps = report_internal::MainSteps(d);
  json out = json::object();
  if (!steps || steps->empty()) return out;
  std::vector<report_internal::RankLine> ranks;
  for (const auto& [stream, s] : streams) {
    if (s.steps > 0 && !s.step_ms.empty()) ranks.push_back({"step time", stream, &s.step_ms});
  }
  if (ranks.size() >= 2) {
    out["ranks"] = report_internal::RankCurve("step-time-ranks", "Step time, every rank", "ms",
                                              ranks, a.slowest_rank, o.max_points);
  }
  std::vector<double> x, dur, wait;
  bool any_wait = false;
  for (const auto& s : *steps) {
    x.push_back(static_cast<double>(s.step));
    dur.push_back((s.end_us - s.start_us) / 1000.0);
    wait.push_back(s.data_wait_us >= 0 ? s.data_wait_us / 1000.0 : kNaN);
    any_wait |= s.data_wait_us >= 0;
  }
  std::vector<Line> lines = {{"step time", dur}};
  if (any_wait) lines.push_back({"data wait", wait});
  out["curve"] =
      LineChart("step-time", "Step time", "step", "ms", x, std::move(lines), o.max_points);
  // Histogram up to p99·1.5 (longer steps land in the last bucket, counted as "overflow").
  double lo = a.step_ms.min, hi = std::max(a.step_ms.p99 * 1.5, lo + 1e-3);
  hi = std::min(hi, a.step_ms.max > lo ? a.step_ms.max : lo + 1e-3);
  const int kBins = 40;
  std::vector<uint64_t> counts(kBins, 0);
  uint64_t overflow = 0;
  for (double v : dur) {
    if (v > hi) {
      ++overflow;
      continue;
    }
    int b = static_cast<int>((v - lo) / (hi - lo) * kBins);
    counts[std::clamp(b, 0, kBins - 1)]++;
  }
  json edges = json::array();
  for (int i = 0; i <= kBins; ++i) edges.push_back(Round(lo + (hi - lo) * i / kBins));
  out["histogram"] = {
      {"id", "step-hist"},   {"kind", "histogram"}, {"title", "Step time distribution"},
      {"unit", "ms"},        {"edges", edges},      {"counts", counts},
      {"overflow", overflow}};
  return out;
}

json SystemCharts(const std::vector<SystemTable>& tables, const RunAnalysis& a,
                  const RenderOptions& o) {
  json nodes = json::array();
  const double gb = 1.0 / (1024.0 * 1024 * 1024), mb = 1.0 / (1024.0 * 1024);
  for (const auto& t : tables) {
    std::vector<double> x;
    for (int64_t w : t.wall_us) x.push_back((w - a.start_us) / 1e6);
    auto pick = [&](std::initializer_list<const char*> names, double scale) {
      std::vector<Line> lines;
      for (const char* n : names) {
        if (const auto* c = t.Col(n)) lines.push_back({n, *c, scale});
      }
      return lines;
    };
    auto gpus = [&](const char* field, double scale) {
      std::vector<Line> lines;
      for (int i = 0; i < 64; ++i) {
        std::string n = schema::GpuMetric(i, field);
        if (const auto* c = t.Col(n)) lines.push_back({n, *c, scale});
      }
      return lines;
    };
    json charts = json::array();
    auto add = [&](const std::string& id, const std::string& title, const std::string& unit,
                   std::vector<Line> lines) {
      if (lines.empty()) return;
      json c =
          LineChart(t.node + "-" + id, title, "time (s)", unit, x, std::move(lines), o.max_points);
      charts.push_back(std::move(c));
    };
    add("gpu-util", "GPU utilisation", "%", gpus(schema::gpu::kUtil, 1));
    add("gpu-mem", "GPU memory used", "GB", gpus(schema::gpu::kMemUsedBytes, gb));
    add("cpu", "CPU utilisation", "%", pick({schema::kCpuUtil, schema::kProcTreeCpuUtil}, 1));
    add("mem", "Memory", "GB", pick({schema::kMemUsedBytes, schema::kProcTreeRssBytes}, gb));
    add("disk", "Disk I/O", "MB/s", pick({schema::kDiskReadBytesPerS, schema::kDiskWriteBytesPerS}, mb));
    add("net", "Network", "MB/s", pick({schema::kNetRxBytesPerS, schema::kNetTxBytesPerS}, mb));
    add("gpu-power", "GPU power", "W", gpus(schema::gpu::kPowerW, 1));
    add("gpu-temp", "GPU temperature", "°C", gpus(schema::gpu::kTempC, 1));
    nodes.push_back({{"node", t.node}, {"charts", charts}});
  }
  return nodes;
}

// Step number at each time (downsampled) so time charts can show "step N" under the cursor.
json StepClock(const RunData& d, const RunAnalysis& a) {
  const auto* steps = report_internal::MainSteps(d);
  json out = json::array();
  if (!steps || steps->empty()) return out;
  size_t stride = std::max<size_t>(1, steps->size() / 2000);
  for (size_t i = 0; i < steps->size(); i += stride) {
    out.push_back({Round(((*steps)[i].start_us - a.start_us) / 1e6), (*steps)[i].step});
  }
  return out;
}

std::string Replace(std::string s, const std::string& marker, std::string_view with) {
  size_t pos = s.find(marker);
  if (pos == std::string::npos) return s;
  return s.replace(pos, marker.size(), with);
}

// Keeps inlined JavaScript from ending its <script> element early: "</script" (any case) becomes
// "<\/script" and "<!--" becomes "<\!--", which mean the same in strings, regular expressions and
// comments. Other "</" stay as they are: in minified code "</" can close a regular expression
// (`/</g`), where a backslash would change the program.
std::string ScriptSafe(std::string_view in) {
  std::string s(in);
  auto lower = [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); };
  for (size_t pos = 0; (pos = s.find('<', pos)) != std::string::npos; ++pos) {
    if (s.compare(pos, 4, "<!--") == 0) {
      s.insert(pos + 1, "\\");
    } else if (pos + 8 <= s.size() && s[pos + 1] == '/') {
      std::string word;
      for (size_t i = pos + 2; i < pos + 8; ++i) word += lower(s[i]);
      if (word == "script") s.insert(pos + 1, "\\");
    }
  }
  return s;
}

// JSON inside <script type="application/json">: every "<" is written \u003c (JSON strings are
// the only place it can occur), so nothing in the data can close or escape the element.
std::string JsonSafe(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (char c : in) {
    if (c == '<') {
      s += "\\u003c";
    } else {
      s += c;
    }
  }
  return s;
}

std::string HtmlEscape(const std::string& in) {
  std::string s;
  for (char c : in) {
    switch (c) {
      case '<':
        s += "&lt;";
        break;
      case '>':
        s += "&gt;";
        break;
      case '&':
        s += "&amp;";
        break;
      case '"':
        s += "&quot;";
        break;
      default:
        s += c;
    }
  }
  return s;
}

std::string TraceHref(const RunData& d, const std::string& trace, const std::string& out_html) {
  if (trace.empty()) return "";
  namespace fs = std::filesystem;
  fs::path abs = fs::absolute(fs::path(d.run_dir) / trace);
  if (!out_html.empty()) {
    std::error_code ec;
    fs::path rel = fs::relative(abs, fs::absolute(fs::path(out_html)).parent_path(), ec);
    if (!ec && !rel.empty()) return rel.generic_string();
  }
  return "file://" + abs.generic_string();
}

std::string Page(const std::string& title, const std::string& data_json) {
  std::string page(WebAsset("report.html"));
  page = Replace(page, "<!--TS:TITLE-->", HtmlEscape(title));
  page = Replace(page, "/*TS:CHART_LIB_CSS*/", WebAsset("dygraph.css"));
  page = Replace(page, "/*TS:REPORT_CSS*/", WebAsset("report.css"));
  page = Replace(page, "/*TS:CHART_LIB_JS*/", ScriptSafe(WebAsset("dygraph.js")));
  page = Replace(page, "/*TS:SCHEMA_JS*/", ScriptSafe(schema::WebScript()));
  page = Replace(page, "/*TS:WIDGETS_JS*/", ScriptSafe(WebAsset("widgets.js")));
  page = Replace(page, "/*TS:CHARTS_JS*/", ScriptSafe(WebAsset("charts.js")));
  page = Replace(page, "/*TS:REPORT_JS*/", ScriptSafe(WebAsset("report.js")));
  page = Replace(page, "/*TS:DATA*/", JsonSafe(data_json));
  return page;
}

}  // namespace

std::string ReportHtml(const RunData& d, const RunAnalysis& a, const RenderOptions& o) {
  std::map<std::string, SystemColumns> system_scratch;
  auto tables = report_internal::BuildSystemTables(d, &system_scratch);
  std::map<std::string, StreamSeries> scratch;
  const auto& streams = report_internal::StreamsOf(d, &scratch);
  json data;
  data["page"] = "report";
  data["summary"] = report_internal::AnalysisJson(a);
  data["generated"] = report_internal::IsoTime(o.generated_us ? o.generated_us : NowMicros());
  json series;
  series["curves"] = Curves(d, streams, a, o);
  series["gradients"] = GradientHeatmap(d, o);
  series["steps"] = StepCharts(d, streams, a, o);
  series["system"] = SystemCharts(tables, a, o);
  series["step_clock"] = StepClock(d, a);
  json markers = json::array();
  for (const auto& f : a.findings) {
    markers.push_back({{"t", Round((f.wall_us - a.start_us) / 1e6)},
                       {"step", f.step},
                       {"label", f.title},
                       {"severity", SeverityName(f.severity)}});
  }
  series["markers"] = markers;
  json traces = json::array();
  for (const auto& p : d.profiles) traces.push_back(TraceHref(d, p.trace_file, o.out_html));
  series["trace_links"] = traces;
  data["series"] = series;
  std::string title = "trainscope report — " + (a.name.empty() ? a.run_dir : a.name);
  return Page(title, data.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::string CompareHtml(const std::string& title, const std::string& body_json) {
  nlohmann::json data = nlohmann::json::parse(body_json, nullptr, false);
  if (data.is_discarded()) data = json::object();
  data["page"] = "compare";
  return Page(title, data.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace trainscope
