#include "test_support.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "input_file.hpp"

extern char** environ;

namespace sampler_test {

namespace {

std::string temp_root() {
  const char* base = std::getenv("TMPDIR");
  return base && *base ? base : "/tmp";
}

}  // namespace

TempDir::TempDir() {
  std::string pattern = temp_root() + "/sampler_test.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  const std::string command = "rm -rf '" + path_ + "'";
  if (std::system(command.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path_.c_str());
}

std::vector<std::string> TempDir::entries() const {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path_.c_str());
  if (dir == nullptr) return names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string npy_with_dict(const std::string& dict, const std::string& payload) {
  std::string header = dict;
  const std::size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string file("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  return file + header + payload;
}

std::string npy_file(const std::string& descr, const std::vector<int64_t>& shape, const std::string& payload,
                     bool fortran) {
  std::string dims;
  for (int64_t dim : shape) dims += std::to_string(dim) + ", ";
  return npy_with_dict(
      "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': (" + dims + "), }",
      payload);
}

std::string safetensors_with_header(const std::string& header_json, const std::string& payload) {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i)
    file[static_cast<std::size_t>(i)] = static_cast<char>((header_json.size() >> (8 * i)) & 0xff);
  return file + header_json + payload;
}

std::string safetensors_file(const std::vector<StTensor>& tensors) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::string payload;
  for (const StTensor& tensor : tensors) {
    std::string dims;
    for (int64_t dim : tensor.shape) dims += (dims.empty() ? "" : ",") + std::to_string(dim);
    header += ",\"" + tensor.name + "\":{\"dtype\":\"" + tensor.dtype + "\",\"shape\":[" + dims +
              "],\"data_offsets\":[" + std::to_string(payload.size()) + "," +
              std::to_string(payload.size() + tensor.data.size()) + "]}";
    payload += tensor.data;
  }
  return safetensors_with_header(header + "}", payload);
}

std::vector<float> make_logits(int64_t rows, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::student_t_distribution<float> tail(4.0f);
  std::uniform_int_distribution<int64_t> token(0, vocab - 1);
  std::vector<float> logits(static_cast<std::size_t>(rows * vocab));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits.data() + r * vocab;
    // Multiples of 1/8 in [-7, 7] need at most 6 significant bits, so they survive f16 and bf16
    // exactly; and ties happen, as they do in real logits.
    for (int64_t v = 0; v < vocab; ++v) row[v] = std::round(std::clamp(tail(rng), -7.0f, 7.0f) * 8.0f) / 8.0f;
    for (int spike = 0; spike < 3; ++spike) row[token(rng)] = 8.0f + static_cast<float>(spike);
  }
  return logits;
}

RunResult run_sampler(const std::vector<std::string>& args) {
  static int serial = 0;
  const std::string base = temp_root() + "/sampler_run." + std::to_string(::getpid()) + "." + std::to_string(serial++);
  const std::string out_path = base + ".out", err_path = base + ".err";

  std::vector<std::string> argv_strings = {SAMPLER_EXECUTABLE};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error(std::string("cannot run ") + argv[0] + ": " + std::strerror(spawned));
  int status = 0;
  ::waitpid(pid, &status, 0);

  RunResult result;
  // A crash (signal) reads as 128 + signal, like a shell reports it: never 0 or 1.
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  ::unlink(out_path.c_str());
  ::unlink(err_path.c_str());
  return result;
}

template <class T>
NpyArray<T> read_npy(const std::string& path, const std::string& descr) {
  const sampler::InputFile file(path);
  NpyArray<T> array;
  array.header = sampler::read_npy_header(file);
  if (array.header.descr != descr) throw std::runtime_error(path + ": descr " + array.header.descr + ", want " + descr);
  int64_t count = 1;
  for (int64_t dim : array.header.shape) count *= dim;
  if (file.size() != array.header.data_offset + count * static_cast<int64_t>(sizeof(T))) {
    throw std::runtime_error(path + ": size does not match its header");
  }
  array.values.resize(static_cast<std::size_t>(count));
  file.read_at(array.header.data_offset, array.values.data(), array.values.size() * sizeof(T));
  return array;
}
template NpyArray<float> read_npy(const std::string&, const std::string&);
template NpyArray<int32_t> read_npy(const std::string&, const std::string&);

int count_lines(const std::string& text) {
  if (text.empty()) return 0;
  return static_cast<int>(std::count(text.begin(), text.end(), '\n')) + (text.back() == '\n' ? 0 : 1);
}

}  // namespace sampler_test
