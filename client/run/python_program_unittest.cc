#include "client/run/python_program.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace flopscope::client {
namespace {

namespace fs = std::filesystem;

TEST(IsPythonProgramTest, PythonInterpretersLaunchersAndPyFilesByName) {
  const Environment no_path = Environment::FromEntries({"PATH="});
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"python", "train.py"},
                                             {"python3", "-m", "torch.distributed.run"},
                                             {"/usr/bin/python3.11", "x.py"},
                                             {"/opt/conda/bin/python3.10"},
                                             {"torchrun", "--nproc-per-node", "2", "train.py"},
                                             {"./train.py", "--epochs", "1"},
                                             {"train.py"}}) {
    EXPECT_TRUE(IsPythonProgram(command, no_path)) << command.front();
  }
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"sh", "-c", "python train.py"},
                                             {"/usr/bin/true"},
                                             {"pythonic-tool"},
                                             {"python-config"},
                                             {"train"},
                                             {""},
                                             {}}) {
    EXPECT_FALSE(IsPythonProgram(command, no_path)) << (command.empty() ? "{}" : command.front());
  }
}

TEST(IsPythonProgramTest, ShebangLines) {
  EXPECT_TRUE(ShebangNamesPython("#!/usr/bin/python3\nimport torch\n"));
  EXPECT_TRUE(ShebangNamesPython("#!/usr/bin/env python\n"));
  EXPECT_TRUE(ShebangNamesPython("#! /usr/bin/env -S python3.12 -u\n"));
  EXPECT_TRUE(ShebangNamesPython("#!/opt/venv/bin/python3"));
  EXPECT_FALSE(ShebangNamesPython("#!/bin/sh\n# python\n"));
  EXPECT_FALSE(ShebangNamesPython("#!/bin/bash -c python\n"));  // not the interpreter's name
  EXPECT_FALSE(ShebangNamesPython("import torch\n"));
  EXPECT_FALSE(
      ShebangNamesPython("\x7f"
                         "ELF"));
  EXPECT_FALSE(ShebangNamesPython(""));
}

// A script found on PATH (accelerate, deepspeed, a train.py made executable under another name)
// is Python when its shebang says so.
TEST(IsPythonProgramTest, ScriptOnPathIsReadForItsShebang) {
  std::string pattern = absl::StrCat(::testing::TempDir(), "/pyprog-XXXXXX");
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const fs::path dir = pattern;
  std::ofstream(dir / "accelerate") << "#!/usr/bin/env python3\nimport sys\n";
  std::ofstream(dir / "launch") << "#!/bin/sh\nexec python \"$@\"\n";
  const Environment env = Environment::FromEntries({"PATH=/nonexistent:" + dir.string()});
  EXPECT_TRUE(IsPythonProgram({"accelerate", "launch", "train.py"}, env));
  EXPECT_TRUE(IsPythonProgram({(dir / "accelerate").string()}, Environment()));
  EXPECT_FALSE(IsPythonProgram({"launch", "train.py"}, env));
  EXPECT_FALSE(IsPythonProgram({"missing-program"}, env));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace flopscope::client
