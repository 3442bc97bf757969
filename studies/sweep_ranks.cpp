#include "studies/sweep_ranks.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace servesim::studies {

struct SweepRanks::Mpi {
  void* handle = nullptr;
  int (*init)(int*, int*) = nullptr;
  void (*finalize)() = nullptr;
  void (*bcast_count)(std::int64_t*) = nullptr;
  void (*bcast)(std::int64_t*, std::int64_t) = nullptr;
  void (*send)(const char*, std::int64_t) = nullptr;
  std::int64_t (*probe)() = nullptr;
  void (*recv)(char*, std::int64_t) = nullptr;
};

namespace {

// The number of processes mpirun (Open MPI's, or another PMI launcher) started, or 0.
int launched_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  }
  if (std::getenv("PMIX_RANK")) return 1;
  return 0;
}

// libservesim_mpi.so beside the running binary (build/), unless SERVESIM_MPI_PLUGIN names one.
std::string plugin_path() {
  if (const char* p = std::getenv("SERVESIM_MPI_PLUGIN")) return p;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path() / "libservesim_mpi.so").string();
}

template <class F>
void bind(void* handle, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!fn) throw std::runtime_error(std::string("the MPI plugin lacks ") + name);
}

}  // namespace

bool SweepRanks::built_with_mpi() {
#ifdef SERVESIM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

SweepRanks::SweepRanks() {
  const int launched = launched_size();
  if (launched == 0) return;  // a plain process: one rank, no MPI at all
  if (!built_with_mpi()) {
    if (launched > 1) {
      throw std::runtime_error("started by mpirun with " + std::to_string(launched) +
                               " processes, but this servesim was built without MPI (install "
                               "libopenmpi-dev and rebuild; CMake option SERVESIM_MPI)");
    }
    return;
  }
  const std::string path = plugin_path();
  // RTLD_GLOBAL: Open MPI loads its own components and needs its symbols visible to them.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) throw std::runtime_error("cannot load the MPI plugin " + path + ": " + dlerror());
  mpi_ = std::make_unique<Mpi>();
  mpi_->handle = handle;
  bind(handle, "servesim_mpi_init", mpi_->init);
  bind(handle, "servesim_mpi_finalize", mpi_->finalize);
  bind(handle, "servesim_mpi_bcast_count", mpi_->bcast_count);
  bind(handle, "servesim_mpi_bcast", mpi_->bcast);
  bind(handle, "servesim_mpi_send", mpi_->send);
  bind(handle, "servesim_mpi_probe", mpi_->probe);
  bind(handle, "servesim_mpi_recv", mpi_->recv);
  if (mpi_->init(&rank_, &size_) != 0) {
    throw std::runtime_error("this MPI library does not allow calls from several threads");
  }
}

SweepRanks::~SweepRanks() {
  // The plugin stays loaded: Open MPI does not support being unloaded after MPI_Finalize.
  if (mpi_) mpi_->finalize();
}

void SweepRanks::broadcast(std::vector<std::int64_t>& values) {
  if (!mpi_) return;
  auto n = static_cast<std::int64_t>(values.size());
  mpi_->bcast_count(&n);
  values.resize(static_cast<std::size_t>(n));
  if (n > 0) mpi_->bcast(values.data(), n);
}

void SweepRanks::send_to_root(const std::string& record) {
  if (!mpi_) throw std::logic_error("send_to_root without MPI");
  mpi_->send(record.data(), static_cast<std::int64_t>(record.size()));
}

bool SweepRanks::try_receive(std::string& record) {
  if (!mpi_) return false;
  const std::int64_t n = mpi_->probe();
  if (n < 0) return false;
  record.assign(static_cast<std::size_t>(n), '\0');
  mpi_->recv(record.data(), n);
  return true;
}

}  // namespace servesim::studies
