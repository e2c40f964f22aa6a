#include "blocks/block_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <system_error>
#include <vector>

#include "blocks/block_id.h"
#include "blocks/checksum.h"
#include "dockhand/base/logging.h"
#include "dockhand/base/thread_name.h"

namespace dockhand::agent {
namespace {

using Kind = BlockStoreError::Kind;

// Where a block's checksum is recorded with its file.
constexpr const char* kChecksumAttribute = "user.dockhand.checksum";
constexpr const char* kQuarantine = ".quarantine";

// The file system keeps no user extended attributes (or none on this file).
bool noUserAttributes(int error) { return error == ENOTSUP || error == EOPNOTSUPP; }

BlockStoreError ioError(const std::string& what, int error) {
  return BlockStoreError(error == ENOSPC || error == EDQUOT ? Kind::kDiskFull : Kind::kIo,
                         what + ": " + std::strerror(error));
}

void fsyncPath(const std::filesystem::path& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw ioError("cannot open " + path.string(), errno);
  int rc = ::fsync(fd);
  int error = errno;
  ::close(fd);
  if (rc != 0) throw ioError("cannot fsync " + path.string(), error);
}

}  // namespace

AlignedBuffer::AlignedBuffer(std::size_t size)
    : size_((size + BlockStore::kDirectAlign - 1) / BlockStore::kDirectAlign *
            BlockStore::kDirectAlign) {
  data_.reset(static_cast<char*>(std::aligned_alloc(BlockStore::kDirectAlign, size_)));
  if (!data_) throw std::bad_alloc();
}

void AlignedBuffer::Free::operator()(char* p) const { std::free(p); }

BlockStore::BlockStore(std::filesystem::path dir)
    : dir_(std::move(dir)), incoming_(dir_ / ".incoming") {
  std::error_code ec;
  std::filesystem::remove_all(incoming_, ec);  // half-written blocks of an earlier agent
  std::filesystem::create_directories(incoming_, ec);
  if (ec) {
    throw BlockStoreError(
        Kind::kIo, "cannot create block directory " + incoming_.string() + ": " + ec.message());
  }
  // Blocks are the agent's: tasks (which may run as other users) and other users of the
  // machine get them from the block server, not from the files.
  std::filesystem::permissions(dir_, std::filesystem::perms::owner_all, ec);
  if (ec) {
    throw BlockStoreError(Kind::kIo, "cannot make block directory " + dir_.string() +
                                         " private (0700): " + ec.message());
  }
  adoptExisting();
}

void BlockStore::adoptExisting() {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    std::string name = entry.path().filename().string();
    if (name != ".incoming" && name != kQuarantine) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::filesystem::path path = dir_ / name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;  // gone meanwhile
    if (!S_ISREG(st.st_mode) || !isValidBlockId(name)) {
      quarantine(
          name, "not a block (a block is a regular file named " + std::string(kBlockIdForms) + ")");
      continue;
    }
    std::string found;
    try {
      found = checksumOfFile(path);
    } catch (const std::exception& e) {
      quarantine(name, std::string("unreadable: ") + e.what());
      continue;
    }
    char recorded[64];
    const ssize_t n = ::getxattr(path.c_str(), kChecksumAttribute, recorded, sizeof recorded);
    if (n < 0 && noUserAttributes(errno)) {
      ++unverified_;
    } else if (n < 0) {
      quarantine(name,
                 errno == ENODATA
                     ? "no checksum recorded with it (not written by this agent's store)"
                     : std::string("cannot read its recorded checksum: ") + std::strerror(errno));
      continue;
    } else if (std::string_view(recorded, static_cast<std::size_t>(n)) != found) {
      quarantine(name, "its content has checksum " + found + ", not the " +
                           std::string(recorded, static_cast<std::size_t>(n)) +
                           " recorded when it was written (torn or damaged)");
      continue;
    }
    blocks_.emplace(name, BlockMeta{name, static_cast<std::uint64_t>(st.st_size), found});
  }
  auto log = logger("blocks");
  if (!blocks_.empty() || !quarantined_.empty()) {
    log->info("block store {}: {} block(s) from an earlier run adopted, {} quarantined",
              dir_.string(), blocks_.size(), quarantined_.size());
  }
  if (unverified_ > 0) {
    log->warn(
        "block store {}: the file system keeps no user extended attributes, so the {} block(s) "
        "found were adopted without a recorded checksum to verify them against",
        dir_.string(), unverified_);
  }
}

void BlockStore::quarantine(const std::string& name, const std::string& reason) {
  const std::filesystem::path dir = dir_ / kQuarantine;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::filesystem::path target = dir / name;
  for (int i = 1; std::filesystem::exists(std::filesystem::symlink_status(target)); ++i) {
    target = dir / (name + "." + std::to_string(i));
  }
  const std::filesystem::path from = dir_ / name;
  if (ec || ::rename(from.c_str(), target.c_str()) != 0) {
    // Still never served (it is not in the index); said so, and left where it is.
    const std::string why = ec ? ec.message() : std::strerror(errno);
    logger("blocks")->error("block store {}: {} is {}, and cannot be moved to {}: {}",
                            dir_.string(), name, reason, dir.string(), why);
    quarantined_.push_back({name, from, reason});
    return;
  }
  logger("blocks")->warn("block store {}: quarantined {} (moved to {}): {}", dir_.string(), name,
                         target.string(), reason);
  quarantined_.push_back({name, target, reason});
}

void BlockStore::recordChecksum(int fd, const std::string& id, const std::string& checksum) {
  if (!can_record_.load(std::memory_order_relaxed)) return;
  if (::fsetxattr(fd, kChecksumAttribute, checksum.data(), checksum.size(), 0) == 0) return;
  if (noUserAttributes(errno)) {
    if (can_record_.exchange(false)) {
      logger("blocks")->warn(
          "block store {}: the file system keeps no user extended attributes; checksums are "
          "not recorded with blocks, and blocks found after a restart cannot be verified",
          dir_.string());
    }
    return;
  }
  throw ioError("block " + id + ": cannot record its checksum", errno);
}

std::filesystem::path BlockStore::pathOf(std::string_view id) const {
  if (!isValidBlockId(id)) {
    throw BlockStoreError(Kind::kInvalidId, "invalid block id '" + std::string(id) +
                                                "' (expected " + std::string(kBlockIdForms) + ")");
  }
  return dir_ / std::string(id);
}

void BlockStore::syncDir() const { fsyncPath(dir_, O_RDONLY | O_DIRECTORY); }

// ---- Writer --------------------------------------------------------------------------------

std::unique_ptr<BlockStore::Writer> BlockStore::create(const std::string& id) {
  pathOf(id);  // validates
  std::uint64_t n;
  {
    std::lock_guard lock(mutex_);
    n = ++next_temp_;
  }
  std::filesystem::path temp = incoming_ / (id + "." + std::to_string(n));
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_DIRECT, 0600);
  const bool direct = fd >= 0;
  if (fd < 0 && errno == EINVAL) {
    // A file system without O_DIRECT (ramfs, older tmpfs). Some create the file before they
    // refuse the flag, so the name may exist now: it is this writer's own (the counter makes
    // it unique), hence no O_EXCL the second time.
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  }
  if (fd < 0) throw ioError("cannot create " + temp.string(), errno);
  auto writer = std::unique_ptr<Writer>(new Writer(*this, id, std::move(temp), fd));
  writer->direct_ = direct;
  return writer;
}

BlockStore::Writer::Writer(BlockStore& store, std::string id, std::filesystem::path temp, int fd)
    : store_(store), id_(std::move(id)), temp_(std::move(temp)), fd_(fd), hash_(new Xxh64()) {}

BlockStore::Writer::~Writer() {
  abort();
  delete static_cast<Xxh64*>(hash_);
}

void BlockStore::Writer::abort() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!done_) {
    ::unlink(temp_.c_str());
    done_ = true;
  }
}

void BlockStore::Writer::write(const char* data, std::size_t size) {
  if (done_ || fd_ < 0) throw BlockStoreError(Kind::kIo, "block " + id_ + ": writer is closed");
  static_cast<Xxh64*>(hash_)->update(data, size);
  if (direct_ && (reinterpret_cast<std::uintptr_t>(data) % kDirectAlign != 0 ||
                  size % kDirectAlign != 0 || written_ % kDirectAlign != 0)) {
    stopDirect();
  }
  while (direct_ && size > 0) {
    ssize_t n = ::write(fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL) {  // the device wants a larger alignment, or refuses it
      stopDirect();
      break;
    }
    if (n < 0) throw ioError("block " + id_ + ": cannot write", errno);
    data += n;
    size -= static_cast<std::size_t>(n);
    written_ += static_cast<std::uint64_t>(n);
    if (static_cast<std::size_t>(n) % kDirectAlign != 0) stopDirect();
  }
  if (size > 0) writeBuffered(data, size);
}

void BlockStore::Writer::stopDirect() {
  if (!direct_) return;
  int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0) {
    throw ioError("block " + id_ + ": cannot leave O_DIRECT", errno);
  }
  direct_ = false;
  flushed_ = written_;  // what went direct is on the disk already
}

void BlockStore::Writer::writeBuffered(const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ioError("block " + id_ + ": cannot write", errno);
    data += n;
    size -= static_cast<std::size_t>(n);
    written_ += static_cast<std::uint64_t>(n);
  }
  // Start writeback of every full 8 MiB as it arrives, so that the disk works while the rest
  // of the block is still coming and the fsync in commit() has little left to wait for.
  // Advisory: an error here shows again, and is handled, at that fsync.
  constexpr std::uint64_t kWritebackStep = 8u << 20;
  if (written_ - flushed_ >= kWritebackStep) {
    const std::uint64_t upto = written_ - written_ % kWritebackStep;
    ::sync_file_range(fd_, static_cast<off_t>(flushed_), static_cast<off_t>(upto - flushed_),
                      SYNC_FILE_RANGE_WRITE);
    flushed_ = upto;
  }
}

BlockMeta BlockStore::Writer::commit(std::string_view expected_checksum) {
  if (done_ || fd_ < 0) throw BlockStoreError(Kind::kIo, "block " + id_ + ": writer is closed");
  std::string actual = static_cast<Xxh64*>(hash_)->text();
  if (!expected_checksum.empty() && expected_checksum != actual) {
    abort();
    throw BlockStoreError(Kind::kChecksumMismatch,
                          "block " + id_ + ": checksum mismatch: expected " +
                              std::string(expected_checksum) + ", got " + actual);
  }
  try {
    store_.recordChecksum(fd_, id_, actual);
  } catch (...) {
    abort();
    throw;
  }
  if (::fsync(fd_) != 0) {
    int error = errno;
    abort();
    throw ioError("block " + id_ + ": cannot fsync", error);
  }
  ::close(fd_);
  fd_ = -1;
  try {
    BlockMeta meta = store_.install(id_, temp_, written_, actual);
    done_ = true;
    return meta;
  } catch (...) {
    abort();
    throw;
  }
}

// ---- Adding, finding, removing -------------------------------------------------------------

BlockMeta BlockStore::install(const std::string& id, const std::filesystem::path& temp,
                              std::uint64_t size, const std::string& checksum) {
  std::filesystem::path target = pathOf(id);
  BlockMeta meta{id, size, checksum};
  {
    std::lock_guard lock(mutex_);
    auto it = blocks_.find(id);
    // A held block whose file went away behind the store's back (deleted, a disk replaced) is
    // not held any more: the driver reran the task that made it, and this is its new copy.
    struct stat held {};
    if (it != blocks_.end() && ::lstat(target.c_str(), &held) != 0 && errno == ENOENT) {
      blocks_.erase(it);
      it = blocks_.end();
    }
    if (it != blocks_.end()) {
      if (it->second.checksum != checksum) {
        throw BlockStoreError(Kind::kConflict, "block " + id + " already exists with checksum " +
                                                   it->second.checksum + ", not " + checksum);
      }
      ::unlink(temp.c_str());
      return it->second;
    }
    if (::rename(temp.c_str(), target.c_str()) != 0) {
      throw ioError("block " + id + ": cannot rename " + temp.string() + " into the store", errno);
    }
    blocks_[id] = meta;
  }
  // The block is complete and fsynced; make its name durable too.
  syncDir();
  return meta;
}

BlockMeta BlockStore::adopt(const std::string& id, const std::filesystem::path& file) {
  pathOf(id);  // validates
  // Never through a symbolic link: a task could point one at any file the agent can read.
  int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw ioError("block " + id + ": cannot open " + file.string(), errno);
  struct stat file_stat {};
  if (::fstat(fd, &file_stat) != 0 || !S_ISREG(file_stat.st_mode)) {
    int error = S_ISREG(file_stat.st_mode) ? errno : EINVAL;
    ::close(fd);
    throw ioError("block " + id + ": " + file.string() + " is not a regular file", error);
  }
  Xxh64 hash;
  std::uint64_t size = 0;
  std::vector<char> buffer(1 << 20);
  if (int error = readToEnd(fd, buffer,
                            [&](const char* data, std::size_t n) {
                              hash.update(data, n);
                              size += n;
                            });
      error != 0) {
    ::close(fd);
    throw ioError("block " + id + ": cannot read " + file.string(), error);
  }
  struct stat dir_stat {};
  // Renamed in only when it is a file of the agent's own with no other name: then making it
  // 0600 changes nothing anybody else owns. Anything else is copied into a new file.
  if (::stat(dir_.c_str(), &dir_stat) == 0 && file_stat.st_dev == dir_stat.st_dev &&
      file_stat.st_uid == ::geteuid() && file_stat.st_nlink == 1 && ::fchmod(fd, 0600) == 0) {
    try {
      recordChecksum(fd, id, hash.text());
    } catch (...) {
      ::close(fd);
      throw;
    }
    int rc = ::fsync(fd);
    int error = errno;
    ::close(fd);
    if (rc != 0) throw ioError("block " + id + ": cannot fsync " + file.string(), error);
    return install(id, file, size, hash.text());
  }
  auto writer = create(id);
  if (::lseek(fd, 0, SEEK_SET) != 0) {
    int error = errno;
    ::close(fd);
    throw ioError("block " + id + ": cannot read " + file.string(), error);
  }
  int error = 0;
  try {
    error = readToEnd(fd, buffer, [&](const char* data, std::size_t n) { writer->write(data, n); });
  } catch (...) {
    ::close(fd);  // the store refused the copy (disk full, ...)
    throw;
  }
  ::close(fd);
  if (error != 0) throw ioError("block " + id + ": cannot read " + file.string(), error);
  BlockMeta meta = writer->commit(hash.text());
  ::unlink(file.c_str());
  return meta;
}

std::optional<BlockMeta> BlockStore::find(std::string_view id) const {
  std::lock_guard lock(mutex_);
  auto it = blocks_.find(id);
  if (it == blocks_.end()) return std::nullopt;
  return it->second;
}

std::vector<BlockMeta> BlockStore::list() const {
  std::lock_guard lock(mutex_);
  std::vector<BlockMeta> out;
  out.reserve(blocks_.size());
  for (const auto& [id, meta] : blocks_) out.push_back(meta);
  return out;
}

std::size_t BlockStore::count() const {
  std::lock_guard lock(mutex_);
  return blocks_.size();
}

std::uint64_t BlockStore::totalBytes() const {
  std::lock_guard lock(mutex_);
  std::uint64_t total = 0;
  for (const auto& [id, meta] : blocks_) total += meta.size;
  return total;
}

std::optional<std::filesystem::path> BlockStore::detach(std::string_view id) {
  std::filesystem::path path = pathOf(id);
  std::lock_guard lock(mutex_);
  auto it = blocks_.find(id);
  if (it == blocks_.end()) return std::nullopt;
  blocks_.erase(it);
  // Renamed before the lock goes: a block written under the same id right after is never the
  // file unlinked here.
  std::filesystem::path doomed =
      incoming_ / (std::string(id) + ".removed." + std::to_string(++next_temp_));
  if (::rename(path.c_str(), doomed.c_str()) != 0) {
    ::unlink(path.c_str());
    return std::filesystem::path();
  }
  return doomed;
}

bool BlockStore::remove(std::string_view id) {
  auto doomed = detach(id);
  if (!doomed) return false;
  if (!doomed->empty()) ::unlink(doomed->c_str());
  return true;
}

bool BlockStore::removeLater(std::string_view id) {
  auto doomed = detach(id);
  if (!doomed) return false;
  if (doomed->empty()) return true;
  std::lock_guard lock(reclaim_mutex_);
  doomed_.push_back(std::move(*doomed));
  if (!reclaimer_.joinable())
    reclaimer_ = std::thread([this] {
      nameThisThread("dh-reclaim");
      reclaim();
    });
  reclaim_wake_.notify_one();
  return true;
}

void BlockStore::reclaim() {
  std::unique_lock lock(reclaim_mutex_);
  for (;;) {
    reclaim_wake_.wait(lock, [this] { return reclaim_stopping_ || !doomed_.empty(); });
    if (doomed_.empty()) return;  // stopping, and nothing left
    std::filesystem::path next = std::move(doomed_.front());
    doomed_.pop_front();
    lock.unlock();
    ::unlink(next.c_str());
    lock.lock();
  }
}

BlockStore::~BlockStore() {
  {
    std::lock_guard lock(reclaim_mutex_);
    reclaim_stopping_ = true;
  }
  reclaim_wake_.notify_one();
  if (reclaimer_.joinable()) reclaimer_.join();
}

}  // namespace dockhand::agent
