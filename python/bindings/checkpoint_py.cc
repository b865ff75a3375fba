// Checkpoint commit records (trainscope/checkpoint_record.h, docs/format.md §10) for the Python
// Checkpointer: the digest of the bytes torch.save writes, installing the data file, the
// record, verification, listing and removal, all the core's (shared with checkpoint.h).
#include "py_common.h"
#include "trainscope/checkpoint_record.h"

namespace trainscope::pyb {
namespace {

py::object RecordJson(const CheckpointRecord& r) {
  return py::module_::import("json").attr("loads")(CheckpointRecordToJson(r));
}

}  // namespace

void InitCheckpoint(py::module_& m) {
  m.attr("CHECKPOINT_FORMAT") = kCheckpointFormat;
  m.attr("CHECKPOINT_RECORD_VERSION") = kCheckpointRecordVersion;
  py::class_<CheckpointDigest>(m, "CheckpointDigest",
                               "Size and CRC-32C of a checkpoint's bytes, fed as written.")
      .def(py::init<>())
      .def("update",
           [](CheckpointDigest& d, const py::buffer& b) {
             py::buffer_info info = RequestContiguous(b);
             size_t n = static_cast<size_t>(info.size * info.itemsize);
             if (n >= (64u << 10)) {
               py::gil_scoped_release release;
               d.Update(info.ptr, n);
             } else {
               d.Update(info.ptr, n);
             }
             return n;
           })
      .def_property_readonly("crc32c", &CheckpointDigest::crc32c)
      .def_property_readonly("bytes", &CheckpointDigest::bytes);
  m.def(
      "install_checkpoint_data",
      [](const std::string& dir, const std::string& temp_path, int64_t step) {
        Status s;
        {
          py::gil_scoped_release release;
          s = InstallCheckpointData(dir, temp_path, step);
        }
        if (!s.ok()) ThrowStatus(s);
      },
      py::arg("dir"), py::arg("temp_path"), py::arg("step"),
      "fsync, uncommit the record it replaces, rename to DIR/ckpt-<step>.pt, fsync DIR.");
  m.def(
      "commit_checkpoint",
      [](const std::string& dir, const std::string& record_json) {
        auto r = ParseCheckpointRecord(record_json);  // the record is checked before it commits
        if (!r.ok()) ThrowStatus(r.status());
        Status s;
        {
          py::gil_scoped_release release;
          s = CommitCheckpoint(dir, *r);
        }
        if (!s.ok()) ThrowStatus(s);
        return RecordJson(*r);
      },
      py::arg("dir"), py::arg("record_json"),
      "Writes the commit record (a JSON object, format.md §10; atomically): the checkpoint "
      "exists from then on. Returns it as read back.");
  m.def(
      "read_checkpoint_record",
      [](const std::string& path) {
        auto r = ReadCheckpointRecord(path);
        if (!r.ok()) ThrowStatus(r.status());
        return RecordJson(*r);
      },
      py::arg("path"),
      "The record as a dict (any version; ValueError for a malformed one, OSError if unreadable).");
  m.def(
      "verify_checkpoint",
      [](const std::string& dir, const std::string& record_path) {
        auto r = ReadCheckpointRecord(record_path);
        if (!r.ok()) return "bad record: " + r.status().message();
        py::gil_scoped_release release;
        return VerifyCheckpoint(dir, *r);
      },
      py::arg("dir"), py::arg("record_path"),
      "'' when the data file matches its record; else why not (a version 1 sha256 record: "
      "its size only).");
  m.def(
      "read_verified_checkpoint",
      [](const std::string& dir, const std::string& record_path) -> py::tuple {
        auto r = ReadCheckpointRecord(record_path);
        if (!r.ok()) return py::make_tuple("bad record: " + r.status().message(), py::none(),
                                           py::none());
        if (!r->has_crc32c) return py::make_tuple("", RecordJson(*r), py::none());
        Result<std::string> data = [&] {
          py::gil_scoped_release release;
          return ReadVerifiedCheckpoint(dir, *r);
        }();
        if (!data.ok()) {
          const Status& st = data.status();
          return py::make_tuple(st.IsCorruption() ? st.message() : "unreadable: " + st.message(),
                                RecordJson(*r), py::none());
        }
        return py::make_tuple("", RecordJson(*r), py::bytes(*data));
      },
      py::arg("dir"), py::arg("record_path"),
      "(why, record, data): the data file's bytes read once and checked against the record "
      "(why '' and data the bytes to load), or why not. A version 1 sha256 record: ('', "
      "record, None), its digest is the caller's.");
  m.def("committed_checkpoint_steps", &CommittedCheckpointSteps, py::arg("dir"));
  m.def("remove_checkpoint", &RemoveCheckpoint, py::arg("dir"), py::arg("step"));
}

}  // namespace trainscope::pyb
