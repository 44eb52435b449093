// The backend registry: backends are found by name, loaded as modules only when
// asked for, and a missing one is named with where it was looked for and what
// builds it. The toy backend (toy_backend/) is a folder and one line of
// tests/unit/CMakeLists.txt; its module lies in THD_TOY_BACKEND_DIR.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <thd/datachannel.h>
#include <thd/store.h>
#include <thd/tensor.h>

#include "datachannel/backend_modules.h"
#include "datachannel/backends.h"
#include "datachannel/registry.h"
#include "datachannel/test_util.h"
#include "scoped_env.h"

namespace thd {
namespace {

namespace fs = std::filesystem;

std::string process_maps() {
  std::ifstream in("/proc/self/maps");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool mapped(const std::string& library) { return process_maps().find(library) != std::string::npos; }

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool default_action(int sig) {
  struct sigaction current {};
  return ::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
         (current.sa_flags & SA_SIGINFO) == 0;
}

// A world of `size` ranks, threads of this process, over one in-process store:
// each rank all-reduces its rank + 1.
void all_reduce_in_threads(const std::string& backend, int size) {
  auto store = std::make_shared<HashStore>();
  std::vector<float> sums(static_cast<size_t>(size), -1.0F);
  const auto errors = test::run_rank_threads(size, [&](int rank) {
    DataChannelOptions o;
    o.store = store;
    o.rank = rank;
    o.world_size = size;
    o.timeout = test::kLong;
    o.token = std::string(test::kToken);
    auto channel = DataChannel::create(backend, o);
    Tensor t = Tensor::full({4}, static_cast<float>(rank + 1));
    channel->all_reduce(t);
    sums[static_cast<size_t>(rank)] = t.to_vector<float>()[3];
  });
  for (int rank = 0; rank < size; ++rank) {
    if (errors[static_cast<size_t>(rank)]) std::rethrow_exception(errors[static_cast<size_t>(rank)]);
    EXPECT_EQ(sums[static_cast<size_t>(rank)], static_cast<float>(size * (size + 1) / 2)) << "rank " << rank;
  }
}

TEST(ToyBackend, IsListedFromItsFolderWithoutBeingLoaded) {
  test::ScopedEnv path("THD_BACKEND_PATH", nullptr);
  EXPECT_FALSE(has(DataChannel::available_backends(), "toy")) << "the toy module is only in its own folder";
  test::ScopedEnv toy("THD_BACKEND_PATH", THD_TOY_BACKEND_DIR);
  const auto available = DataChannel::available_backends();
  EXPECT_TRUE(has(available, "toy"));
  EXPECT_TRUE(has(available, "tcp"));
  EXPECT_TRUE(std::is_sorted(available.begin(), available.end()));
  EXPECT_FALSE(mapped("libthd_backend_toy.so")) << "listing must not load the module";
}

TEST(ToyBackend, ChannelOverItAllReduces) {
  test::ScopedEnv toy("THD_BACKEND_PATH", THD_TOY_BACKEND_DIR);
  all_reduce_in_threads("toy", 2);
  EXPECT_TRUE(mapped("libthd_backend_toy.so"));
}

TEST(ToyBackend, ThdrunAcceptsAndListsIt) {
  test::ScopedEnv toy("THD_BACKEND_PATH", THD_TOY_BACKEND_DIR);
  FILE* help = ::popen(THD_THDRUN " --help", "r");
  ASSERT_NE(help, nullptr);
  std::string text;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, help)) text.append(buf, n);
  ASSERT_EQ(::pclose(help), 0) << text;
  const size_t line = text.find("\nbackends: ");
  ASSERT_NE(line, std::string::npos) << text;
  EXPECT_NE(text.find("toy", line), std::string::npos) << text.substr(line);
  // A job over it: thdrun accepts the name and passes it on as THD_BACKEND.
  EXPECT_EQ(std::system(THD_THDRUN " -n 1 --backend toy -- sh -c 'test \"$THD_BACKEND\" = toy'"), 0);
  test::ScopedEnv no_toy("THD_BACKEND_PATH", nullptr);
  EXPECT_NE(std::system(THD_THDRUN " -n 1 --backend toy -- true 2>/dev/null"), 0)
      << "without the module in the search path thdrun must refuse the name";
}

TEST(ModuleLoading, ATcpProgramLoadsNoOtherBackendNorTheirLibraries) {
  all_reduce_in_threads("tcp", 2);
  (void)DataChannel::available_backends();
  const std::string maps = process_maps();
  // (The toy backend's module may be: the whole binary's run loads it first.)
  for (const char* library : {"libthd_backend_mpi", "libthd_backend_ucx", "libthd_backend_libfabric",
                              "libthd_backend_nccl", "libucs", "libucp", "libfabric", "libmpi", "libnccl"}) {
    EXPECT_EQ(maps.find(library), std::string::npos) << library << " is loaded in a program that uses tcp only";
  }
  for (int sig : {SIGHUP, SIGINT, SIGTERM, SIGQUIT}) EXPECT_TRUE(default_action(sig)) << "signal " << sig;
}

TEST(ModuleLoading, AModuleLoadsWithItsLibrariesHandlersUndone) {
  // ucx's libucs takes SIGHUP when it loads; libfabric's PSM driver the
  // termination signals (library_signal_handlers.cpp).
  const auto available = DataChannel::available_backends();
  int loaded = 0;
  for (const char* backend : {"ucx", "libfabric"}) {
    const detail::KnownBackend* known = detail::known_backend(backend);
    if (known == nullptr || known->in_library || !has(available, backend)) continue;
    EXPECT_FALSE(mapped(std::string("libthd_backend_") + backend + ".so"));
    (void)detail::find_backend(backend);
    EXPECT_TRUE(mapped(std::string("libthd_backend_") + backend + ".so"));
    ++loaded;
  }
  if (loaded == 0) GTEST_SKIP() << "built without the ucx and libfabric modules";
  if (THD_WITH_UCX) {
    EXPECT_TRUE(mapped("libucs")) << "the ucx module links libucs";
  }
  for (int sig : {SIGHUP, SIGINT, SIGTERM, SIGQUIT}) EXPECT_TRUE(default_action(sig)) << "signal " << sig;
}

TEST(ModuleLoading, UnknownBackendNamesTheFoldersSearched) {
  THD_EXPECT_THROW_MSG(detail::find_backend("no_such_backend"), ValueError, "unknown backend 'no_such_backend'");
  try {
    detail::find_backend("no_such_backend");
  } catch (const ValueError& e) {
    for (const auto& folder : detail::module_search_path()) {
      EXPECT_NE(std::string(e.what()).find(folder), std::string::npos) << e.what();
    }
  }
  // A name that could be a path is never looked up as a file.
  THD_EXPECT_THROW_MSG(detail::find_backend("../toy"), ValueError, "unknown backend");
}

// The folder a copy of the thd libraries lies in, for the child of
// MissingModuleNamesThePathAndTheOption.
constexpr const char* kLoneLibraryDir = "THD_TEST_LONE_LIBRARY_DIR";

TEST(ModuleLoading, MissingModuleNamesThePathAndTheOption) {
  const detail::KnownBackend* module_backend = nullptr;
  for (const auto& known : detail::known_backends()) {
    if (known.built && !known.in_library) module_backend = &known;
  }
  if (module_backend == nullptr) GTEST_SKIP() << "no backend of this build is a module";
  const std::string name(module_backend->name);

  if (const char* lone = std::getenv(kLoneLibraryDir)) {
    // The child: libthd_datachannel came from a folder without the modules.
    test::ScopedEnv path("THD_BACKEND_PATH", nullptr);
    ASSERT_EQ(detail::module_search_path(), std::vector<std::string>{fs::canonical(lone).string()});
    EXPECT_FALSE(has(DataChannel::available_backends(), name));
    THD_EXPECT_THROW_MSG(detail::find_backend(name), ValueError, "libthd_backend_" + name + ".so");
    try {
      detail::find_backend(name);
    } catch (const ValueError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(fs::canonical(lone).string()), std::string::npos) << message;
      EXPECT_NE(message.find("-D" + std::string(module_backend->option) + "=ON"), std::string::npos) << message;
      EXPECT_NE(message.find("THD_BACKEND_PATH"), std::string::npos) << message;
    }
    // A CUDA tensor's collective then says the device collectives' module is missing.
    for (const auto& known : detail::known_backends()) {
      if (!known.device_collectives || !known.built || known.in_library) continue;
      EXPECT_EQ(detail::make_device_collectives(0, 1), nullptr);
      const std::string why = detail::missing_device_collectives();
      EXPECT_NE(why.find("libthd_backend_" + std::string(known.name) + ".so"), std::string::npos) << why;
    }
    return;
  }
  // The parent: copies of the libraries this program links into a folder of their
  // own, found first through LD_LIBRARY_PATH (the build's RUNPATH comes after it).
  test::TempDir dir;
  for (const auto& entry : fs::directory_iterator(fs::path(detail::module_search_path().back()))) {
    const std::string file = entry.path().filename().string();
    if (file.starts_with("libthd_") && !file.starts_with("libthd_backend_")) {
      fs::copy(entry.path(), dir.path() / file, fs::copy_options::copy_symlinks);
    }
  }
  const std::string command = "LD_LIBRARY_PATH=" + dir.path().string() + " " + kLoneLibraryDir + "=" +
                              dir.path().string() + " /proc/" + std::to_string(::getpid()) +
                              "/exe --gtest_filter=ModuleLoading.MissingModuleNamesThePathAndTheOption";
  FILE* child = ::popen(command.c_str(), "r");
  ASSERT_NE(child, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, child)) out.append(buf, n);
  EXPECT_EQ(::pclose(child), 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

}  // namespace
}  // namespace thd
