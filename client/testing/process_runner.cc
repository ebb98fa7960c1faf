#include "client/testing/process_runner.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

extern char** environ;  // POSIX: this process's environment

namespace flopscope::client::testing {
namespace {

std::string ReadAndRemove(const std::string& path) {
  std::ifstream file(path);
  std::stringstream content;
  content << file.rdbuf();
  unlink(path.c_str());
  return content.str();
}

int OpenTemporary(std::string& path) {
  path = absl::StrCat(::testing::TempDir(), "/process-output-XXXXXX");
  return mkstemp(path.data());
}

// The child's environment, built before fork: between fork and exec a child of a threaded
// process (gRPC servers run in these tests) may only do async-signal-safe work, so no malloc.
std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& set_env) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    if (set_env.count(name) == 0) entries.push_back(text);
  }
  for (const auto& [name, value] : set_env) {
    if (value != kUnset) entries.push_back(name + "=" + value);
  }
  return entries;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& set_env) {
  ProcessResult result;
  std::string out_path, err_path;
  const int out_fd = OpenTemporary(out_path);
  const int err_fd = OpenTemporary(err_path);
  if (out_fd < 0 || err_fd < 0) return result;

  std::vector<std::string> args = argv;
  std::vector<char*> child_argv = Pointers(args);
  std::vector<std::string> environment = ChildEnvironment(set_env);
  std::vector<char*> child_envp = Pointers(environment);

  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execve(child_argv[0], child_argv.data(), child_envp.data());
    _exit(255);
  }
  close(out_fd);
  close(err_fd);
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exited = WIFEXITED(status);
  result.exit_code = result.exited ? WEXITSTATUS(status) : -1;
  result.signaled = WIFSIGNALED(status);
  result.signal = result.signaled ? WTERMSIG(status) : 0;
  result.out = ReadAndRemove(out_path);
  result.err = ReadAndRemove(err_path);
  return result;
}

}  // namespace flopscope::client::testing
