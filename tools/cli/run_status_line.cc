#include "run_status_line.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "trainscope/reader.h"
#include "trainscope/rules.h"
#include "trainscope/schema.h"

namespace trainscope::cli {

RunStatusLine::RunStatusLine(std::string run_dir, bool enabled, std::ostream& out)
    : run_dir_(std::move(run_dir)), enabled_(enabled), out_(out) {
  start_ = std::chrono::steady_clock::now();
  last_ = start_ - std::chrono::seconds(2);
}

RunStatusLine::~RunStatusLine() = default;

void RunStatusLine::Update(const RuleRunner* rules) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::seconds(1)) return;
  last_ = now;
  if (!reader_) {
    auto r = RunReader::Open(run_dir_);
    if (r.ok()) reader_ = std::move(r).value();
  } else {
    (void)reader_->Refresh();
  }
  long elapsed = static_cast<long>(std::chrono::duration<double>(now - start_).count());
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf), "[%02ld:%02ld:%02ld]", elapsed / 3600,
                        (elapsed / 60) % 60, elapsed % 60);
  std::string line(buf, n);
  if (reader_) {
    int64_t step = -1;
    double step_ms = -1;
    for (const auto& wk : reader_->Workers()) {
      const auto& steps = reader_->StepRecords(wk);
      if (!steps.empty() && steps.back().step > step) {
        step = steps.back().step;
        step_ms = (steps.back().end_us - steps.back().start_us) / 1000.0;
      }
    }
    if (step >= 0) {
      n = std::snprintf(buf, sizeof(buf), "  step %lld  %.1f ms/step", (long long)step, step_ms);
      line.append(buf, n);
    }
    for (const auto& s : reader_->Streams()) {
      const auto& samples = reader_->SystemSamples(s);
      if (samples.empty()) continue;
      const schema::SystemSampleView v = schema::ParseSystemSample(samples.back());
      const schema::GpuReading* gpu0 = v.Gpu(0);
      const double cpu = std::isnan(v.cpu_util) ? -1 : v.cpu_util;
      const double gpu = gpu0 == nullptr || std::isnan(gpu0->util) ? -1 : gpu0->util;
      if (cpu >= 0) line += "  CPU " + std::to_string(static_cast<int>(cpu)) + "%";
      line += gpu >= 0 ? "  GPU " + std::to_string(static_cast<int>(gpu)) + "%" : "  no GPU";
      break;
    }
  }
  if (rules) {
    int issues = 0, ok = 0, err = 0, no_data = 0;
    for (const auto& s : rules->Statuses()) {
      issues += s.status == RuleStatus::kIssuesFound;
      err += s.status == RuleStatus::kError;
      no_data += s.status == RuleStatus::kNoData;
      ok += s.status == RuleStatus::kInProgress || s.status == RuleStatus::kNoIssuesFound;
    }
    line += "  rules: " + std::to_string(ok) + " ok";
    if (issues) line += ", " + std::to_string(issues) + " ISSUES";
    if (err) line += ", " + std::to_string(err) + " error";
    if (no_data) line += ", " + std::to_string(no_data) + " no data";
  }
  if (line.size() < width_) line.append(width_ - line.size(), ' ');
  width_ = line.size();
  out_ << "\r" << line << std::flush;
}

void RunStatusLine::Note(const std::string& msg) {
  if (!enabled_) return;
  out_ << "\r" << std::string(width_, ' ') << "\r"
       << "trainscope: " << msg << "\n"
       << std::flush;
}

void RunStatusLine::Finish() {
  if (enabled_ && width_ > 0) out_ << "\n" << std::flush;
}

}  // namespace trainscope::cli
