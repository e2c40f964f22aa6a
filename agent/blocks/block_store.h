// BlockStore: the blocks this agent holds, as immutable files <dir>/<block id>.
//
// A block appears in the directory only complete: every write goes to a temporary file under
// <dir>/.incoming/, is fsynced, its checksum checked, and is then renamed into place (and the
// directory fsynced). A reader — the block server, a migration — therefore never sees half a
// block, and an agent killed mid-write leaves only a temporary file, which the next store on
// that directory removes. Blocks are immutable: writing an id that exists with the same
// checksum is a no-op, with a different one an error.
//
// Each block's checksum is also recorded with its file (the extended attribute
// user.dockhand.checksum, set before the file is fsynced). A store opened on a directory with
// blocks in it — the same agent started again after a restart, an upgrade or a crash — reads
// each one once and adopts it only when its content still has the checksum recorded for it; a
// torn or damaged file, one with no recorded checksum and anything that is not a block is moved
// to <dir>/.quarantine/ and logged, never served. On a file system without user extended
// attributes nothing can be recorded: blocks are then adopted with the checksum of what is on
// disk, and the store says once that it cannot verify them.
//
// Thread-safe: the block server's threads, the executor's I/O threads and the decommissioner
// use one store at once. The index (id -> size, checksum) is in memory.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dockhand/protocol/messages.h"

namespace dockhand::agent {

// A heap buffer aligned to BlockStore::kDirectAlign, whose size is a multiple of it: memory
// that BlockStore::Writer can hand to the disk without copying it.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(std::size_t size);
  char* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> data_;
  std::size_t size_;
};

struct BlockMeta {
  std::string id;
  std::uint64_t size = 0;
  std::string checksum;  // "xxh64:..."
};

// How the driver is told of a block this agent holds: served at <block_url>/blocks/<id>.
inline protocol::BlockInfo describeBlock(const BlockMeta& meta, const std::string& executor_id,
                                         const std::string& block_url) {
  return protocol::BlockInfo{.id = meta.id,
                             .size = meta.size,
                             .checksum = meta.checksum,
                             .executor_id = executor_id,
                             .url = block_url + "/blocks/" + meta.id};
}

// Why a store operation failed; what() is one line naming the block.
class BlockStoreError : public std::runtime_error {
 public:
  enum class Kind { kInvalidId, kDiskFull, kChecksumMismatch, kConflict, kIo };
  BlockStoreError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

class BlockStore {
 public:
  // Creates `dir` when missing, removes what an earlier agent left in dir/.incoming, and
  // adopts the blocks already there whose checksums verify (see above; the others go to
  // dir/.quarantine). Throws BlockStoreError (kIo).
  explicit BlockStore(std::filesystem::path dir);
  // Finishes the space reclaiming queued by removeLater().
  ~BlockStore();
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  // Where block `id` lives (whether or not it exists). Throws kInvalidId for a bad id.
  std::filesystem::path pathOf(std::string_view id) const;

  // Writes one block: create(), write() the bytes, commit(). Destroying a writer that was not
  // committed removes its temporary file. One writer per thread; any number at once.
  //
  // Pieces that start at a multiple of kDirectAlign in the block, lie in memory aligned to it
  // and are whole multiples of it go straight to the disk (O_DIRECT), with no copy through the
  // page cache: a peer's PUT body is received in such pieces (see AlignedBuffer). The first
  // piece that is not (the tail of a block, or a writer fed in arbitrary sizes) and every one
  // after it are written through the page cache; so is everything on a file system that
  // refuses O_DIRECT (tmpfs). Either way commit() makes the whole block durable.
  static constexpr std::size_t kDirectAlign = 4096;
  class Writer {
   public:
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;
    // Throws kDiskFull (no space left) or kIo.
    void write(const char* data, std::size_t size);
    std::uint64_t written() const { return written_; }
    // Whether the next aligned piece would still bypass the page cache.
    bool direct() const { return direct_; }
    // fsyncs, checks the checksum when `expected` is not empty (kChecksumMismatch), renames
    // the file into place and fsyncs the directory. Returns the block's meta.
    BlockMeta commit(std::string_view expected_checksum = {});

   private:
    friend class BlockStore;
    Writer(BlockStore& store, std::string id, std::filesystem::path temp, int fd);
    void abort();
    BlockStore& store_;
    std::string id_;
    std::filesystem::path temp_;
    int fd_ = -1;
    std::uint64_t written_ = 0;
    std::uint64_t flushed_ = 0;  // bytes whose writeback has been started
    void* hash_;                 // Xxh64
    bool direct_ = false;        // fd_ is open with O_DIRECT
    void writeBuffered(const char* data, std::size_t size);
    void stopDirect();
    bool done_ = false;
  };
  std::unique_ptr<Writer> create(const std::string& id);

  // Adds a complete file (a task's output) as block `id`: checksums and fsyncs it, then
  // renames it into the store (copies it when it is on another file system). Returns the
  // block's meta. An id already held with the same content is not an error (the file is
  // removed); with other content it is kConflict.
  BlockMeta adopt(const std::string& id, const std::filesystem::path& file);

  // A file found in the directory at open that was not adopted: its name there, where it went
  // and why.
  struct Quarantined {
    std::string name;
    std::filesystem::path moved_to;
    std::string reason;
  };
  const std::vector<Quarantined>& quarantined() const { return quarantined_; }
  // Blocks adopted at open without a recorded checksum to check (a file system without user
  // extended attributes).
  std::size_t unverified() const { return unverified_; }

  std::optional<BlockMeta> find(std::string_view id) const;
  std::vector<BlockMeta> list() const;
  std::size_t count() const;
  std::uint64_t totalBytes() const;
  // Deletes a block; false when it was not there. A reader that has the file open reads on.
  bool remove(std::string_view id);
  // The same, except that the file's space is given back later, on a thread of the store's:
  // the block is gone at once (find() and list() no longer see it, its id can be written
  // again), but freeing a large file's extents takes time (about 0.5 s per GiB on ext4), which
  // the core thread must not spend. The destructor finishes the queue; what a crash leaves is
  // removed with .incoming at the next start.
  bool removeLater(std::string_view id);

 private:
  BlockMeta install(const std::string& id, const std::filesystem::path& temp, std::uint64_t size,
                    const std::string& checksum);
  void syncDir() const;
  // Records `checksum` with the open file `fd` (before its fsync). Throws kIo on a failure
  // other than a file system without user extended attributes (then nothing is recorded).
  void recordChecksum(int fd, const std::string& id, const std::string& checksum);
  // Reads what the directory holds at open (see above).
  void adoptExisting();
  void quarantine(const std::string& name, const std::string& reason);

  std::filesystem::path dir_;
  std::filesystem::path incoming_;
  mutable std::mutex mutex_;
  std::map<std::string, BlockMeta, std::less<>> blocks_;
  std::uint64_t next_temp_ = 0;
  std::vector<Quarantined> quarantined_;  // written only by the constructor
  std::size_t unverified_ = 0;            // likewise
  std::atomic<bool> can_record_{true};    // the file system takes user extended attributes

  // Takes block `id` out of the store: renamed into .incoming (a metadata-only step) and
  // forgotten, under the lock. The renamed file, to unlink; nullopt when there was no block.
  std::optional<std::filesystem::path> detach(std::string_view id);
  void reclaim();  // the reclaimer thread
  std::mutex reclaim_mutex_;
  std::condition_variable reclaim_wake_;
  std::deque<std::filesystem::path> doomed_;
  bool reclaim_stopping_ = false;
  std::thread reclaimer_;  // started by the first removeLater()
};

}  // namespace dockhand::agent
