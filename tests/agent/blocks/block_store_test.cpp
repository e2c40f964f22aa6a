#include "blocks/block_store.h"

#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "blocks/checksum.h"
#include "support/tmpfs_mount.h"

namespace dockhand::agent {
namespace {

namespace fs = std::filesystem;

class BlockStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dockhand-store-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root = tmpl;
  }
  void TearDown() override { fs::remove_all(root); }

  static std::string checksumOf(const std::string& data) {
    Xxh64 h;
    h.update(data.data(), data.size());
    return h.text();
  }
  static std::string readAll(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Whether files in `dir` can be opened with O_DIRECT (ext4, xfs: yes; tmpfs: no).
  static bool directIoWorksIn(const fs::path& dir) {
    fs::path probe = dir / ".probe";
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
    fs::remove(probe);
    return fd >= 0;
  }

  // Aligned pieces, then a tail of any size: the bytes and the checksum are those written, on
  // any file system.
  static void writeAlignedPiecesAndATail(BlockStore& store, const std::string& id,
                                         bool expect_direct) {
    std::mt19937 rng(7);
    AlignedBuffer piece(256 << 10);
    std::string all;
    auto w = store.create(id);
    for (int i = 0; i < 3; ++i) {
      for (std::size_t j = 0; j < piece.size(); ++j) piece.data()[j] = static_cast<char>(rng());
      w->write(piece.data(), piece.size());
      all.append(piece.data(), piece.size());
      EXPECT_EQ(w->direct(), expect_direct) << "after aligned piece " << i;
    }
    w->write(piece.data(), 1000);  // the tail
    all.append(piece.data(), 1000);
    EXPECT_FALSE(w->direct());
    BlockMeta meta = w->commit(checksumOf(all));
    EXPECT_EQ(meta.size, all.size());
    EXPECT_EQ(readAll(store.pathOf(id)), all);
    EXPECT_EQ(checksumOfFile(store.pathOf(id)), meta.checksum);
  }

  // Entries of the store directory, the temporary area left out.
  std::vector<std::string> visibleFiles(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().filename() != ".incoming" && e.path().filename() != ".quarantine")
        out.push_back(e.path().filename().string());
    }
    return out;
  }

  fs::path root;
};

TEST_F(BlockStoreTest, WriteCommitMakesTheBlockVisibleOnlyAtTheEnd) {
  BlockStore store(root / "blocks");
  std::string data(5 << 20, 'z');
  auto writer = store.create("shuffle_1_2_3");
  writer->write(data.data(), data.size() / 2);
  EXPECT_FALSE(store.find("shuffle_1_2_3"));
  EXPECT_FALSE(fs::exists(root / "blocks" / "shuffle_1_2_3")) << "a half block is visible";
  writer->write(data.data() + data.size() / 2, data.size() - data.size() / 2);
  BlockMeta meta = writer->commit(checksumOf(data));
  EXPECT_EQ(meta.size, data.size());
  EXPECT_EQ(meta.checksum, checksumOf(data));
  EXPECT_EQ(readAll(root / "blocks" / "shuffle_1_2_3"), data);
  EXPECT_EQ(store.count(), 1u);
  EXPECT_EQ(store.totalBytes(), data.size());
}

TEST_F(BlockStoreTest, AbandonedWriterLeavesNothing) {
  BlockStore store(root / "blocks");
  {
    auto writer = store.create("rdd_1_1");
    writer->write("abc", 3);
  }
  EXPECT_FALSE(store.find("rdd_1_1"));
  EXPECT_TRUE(visibleFiles(root / "blocks").empty());
  EXPECT_TRUE(fs::is_empty(root / "blocks" / ".incoming"));
}

TEST_F(BlockStoreTest, ChecksumMismatchIsRefusedAndNothingStored) {
  BlockStore store(root / "blocks");
  auto writer = store.create("rdd_1_1");
  writer->write("abc", 3);
  try {
    writer->commit("xxh64:0000000000000000");
    FAIL() << "a wrong checksum was accepted";
  } catch (const BlockStoreError& e) {
    EXPECT_EQ(e.kind(), BlockStoreError::Kind::kChecksumMismatch);
    EXPECT_NE(std::string(e.what()).find("rdd_1_1"), std::string::npos);
  }
  EXPECT_FALSE(store.find("rdd_1_1"));
  EXPECT_TRUE(visibleFiles(root / "blocks").empty());
}

TEST_F(BlockStoreTest, RefusesIdThatEscapesDirectory) {
  BlockStore store(root / "blocks");
  for (const char* id : {"../x", "task_1_../../x", "..", "task_1_a/b"}) {
    try {
      store.create(id);
      FAIL() << id;
    } catch (const BlockStoreError& e) {
      EXPECT_EQ(e.kind(), BlockStoreError::Kind::kInvalidId) << id;
    }
    EXPECT_THROW(store.pathOf(id), BlockStoreError) << id;
  }
  EXPECT_FALSE(fs::exists(root / "x"));
}

TEST_F(BlockStoreTest, BlocksAreImmutable) {
  BlockStore store(root / "blocks");
  auto a = store.create("rdd_2_2");
  a->write("same", 4);
  a->commit();
  auto again = store.create("rdd_2_2");
  again->write("same", 4);
  EXPECT_EQ(again->commit().checksum, checksumOf("same")) << "the same bytes again are fine";
  auto other = store.create("rdd_2_2");
  other->write("different", 9);
  try {
    other->commit();
    FAIL() << "a block was replaced";
  } catch (const BlockStoreError& e) {
    EXPECT_EQ(e.kind(), BlockStoreError::Kind::kConflict);
  }
  EXPECT_EQ(readAll(store.pathOf("rdd_2_2")), "same");
}

TEST_F(BlockStoreTest, AdoptTakesACompleteFile) {
  BlockStore store(root / "blocks");
  fs::create_directories(root / "out");
  std::ofstream(root / "out" / "task_5_result") << "result bytes";
  BlockMeta meta = store.adopt("task_5_result", root / "out" / "task_5_result");
  EXPECT_EQ(meta.size, 12u);
  EXPECT_EQ(meta.checksum, checksumOf("result bytes"));
  EXPECT_FALSE(fs::exists(root / "out" / "task_5_result"));
  EXPECT_EQ(readAll(store.pathOf("task_5_result")), "result bytes");
}

TEST_F(BlockStoreTest, BlocksArePrivateToTheAgent) {
  BlockStore store(root / "blocks");
  EXPECT_EQ(fs::status(root / "blocks").permissions(), fs::perms::owner_all);
  auto writer = store.create("rdd_1_1");
  writer->write("data", 4);
  writer->commit("");
  EXPECT_EQ(fs::status(store.pathOf("rdd_1_1")).permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
  // An adopted file (a task's output, maybe world-readable) becomes 0600 too.
  fs::create_directories(root / "out");
  std::ofstream(root / "out" / "rdd_1_2") << "output";
  fs::permissions(root / "out" / "rdd_1_2", fs::perms::all);
  store.adopt("rdd_1_2", root / "out" / "rdd_1_2");
  EXPECT_EQ(fs::status(store.pathOf("rdd_1_2")).permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(BlockStoreTest, AdoptRefusesASymbolicLink) {
  BlockStore store(root / "blocks");
  fs::create_directories(root / "out");
  std::ofstream(root / "secret") << "not an output";
  fs::create_symlink(root / "secret", root / "out" / "rdd_3_3");
  EXPECT_THROW(store.adopt("rdd_3_3", root / "out" / "rdd_3_3"), BlockStoreError);
  EXPECT_FALSE(store.find("rdd_3_3"));
  EXPECT_EQ(readAll(root / "secret"), "not an output");
}

TEST_F(BlockStoreTest, AdoptCopiesAFileWithAnotherName) {
  // A hard link to a file elsewhere: the store gets a copy, the file keeps its mode.
  BlockStore store(root / "blocks");
  fs::create_directories(root / "out");
  std::ofstream(root / "elsewhere") << "shared bytes";
  fs::permissions(root / "elsewhere", fs::perms::owner_read | fs::perms::owner_write |
                                          fs::perms::group_read | fs::perms::others_read);
  fs::create_hard_link(root / "elsewhere", root / "out" / "rdd_4_4");
  BlockMeta meta = store.adopt("rdd_4_4", root / "out" / "rdd_4_4");
  EXPECT_EQ(meta.checksum, checksumOf("shared bytes"));
  EXPECT_EQ(readAll(store.pathOf("rdd_4_4")), "shared bytes");
  EXPECT_EQ(fs::hard_link_count(store.pathOf("rdd_4_4")), 1u);
  EXPECT_EQ(fs::hard_link_count(root / "elsewhere"), 1u);
  EXPECT_FALSE(fs::exists(root / "out" / "rdd_4_4"));
  EXPECT_EQ(fs::status(root / "elsewhere").permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
}

TEST_F(BlockStoreTest, ReopenRemovesHalfWrittenBlocksAndIndexesCompleteOnes) {
  {
    BlockStore store(root / "blocks");
    auto done = store.create("rdd_1_1");
    done->write("complete", 8);
    done->commit();
  }
  // What an agent killed mid-write leaves behind.
  std::ofstream(root / "blocks" / ".incoming" / "rdd_1_2.7") << "half";
  BlockStore store(root / "blocks");
  EXPECT_TRUE(store.find("rdd_1_1"));
  EXPECT_EQ(store.find("rdd_1_1")->checksum, checksumOf("complete"));
  EXPECT_FALSE(store.find("rdd_1_2"));
  EXPECT_TRUE(fs::is_empty(root / "blocks" / ".incoming"));
}

TEST_F(BlockStoreTest, ReopenAdoptsVerifiedBlocksAndQuarantinesTheRest) {
  {
    BlockStore store(root / "blocks");
    for (const char* id : {"shuffle_1_0_0", "shuffle_1_1_0", "shuffle_1_2_0"}) {
      auto w = store.create(id);
      w->write("twelve bytes", 12);
      w->commit();
    }
    store.adopt("rdd_2_0", [&] {
      std::ofstream(root / "out") << "from a task";
      return root / "out";
    }());
  }
  if (::getxattr((root / "blocks" / "rdd_2_0").c_str(), "user.dockhand.checksum", nullptr, 0) < 0) {
    ASSERT_EQ(errno, ENOTSUP) << "a block was written without its checksum recorded";
    GTEST_SKIP() << "this file system keeps no user extended attributes";
  }
  // While the agent was down: one block truncated, one damaged in place (same size), a file
  // put there by hand under a block's name, and a file that is no block at all.
  fs::resize_file(root / "blocks" / "shuffle_1_1_0", 5);
  std::fstream(root / "blocks" / "shuffle_1_2_0", std::ios::in | std::ios::out) << "TWELVE";
  std::ofstream(root / "blocks" / "rdd_9_9") << "not ours";
  std::ofstream(root / "blocks" / "notes.txt") << "junk";

  BlockStore store(root / "blocks");
  EXPECT_EQ(store.find("shuffle_1_0_0")->checksum, checksumOf("twelve bytes"));
  EXPECT_EQ(store.find("rdd_2_0")->checksum, checksumOf("from a task"));
  EXPECT_EQ(store.count(), 2u);
  std::map<std::string, std::string> why;
  for (const auto& q : store.quarantined()) {
    why[q.name] = q.reason;
    EXPECT_EQ(q.moved_to, root / "blocks" / ".quarantine" / q.name);
    EXPECT_TRUE(fs::exists(q.moved_to));
    EXPECT_FALSE(fs::exists(root / "blocks" / q.name)) << q.name << " is still servable";
  }
  ASSERT_EQ(why.size(), 4u);
  EXPECT_NE(why["shuffle_1_1_0"].find("torn or damaged"), std::string::npos);
  EXPECT_NE(why["shuffle_1_2_0"].find("torn or damaged"), std::string::npos);
  EXPECT_NE(why["rdd_9_9"].find("no checksum recorded"), std::string::npos);
  EXPECT_NE(why["notes.txt"].find("not a block"), std::string::npos);
  EXPECT_EQ(readAll(root / "blocks" / ".quarantine" / "shuffle_1_1_0"), "twelv");

  // The same names quarantined again later do not overwrite the earlier ones.
  std::ofstream(root / "blocks" / "notes.txt") << "more junk";
  BlockStore again(root / "blocks");
  EXPECT_EQ(again.count(), 2u);
  EXPECT_EQ(readAll(root / "blocks" / ".quarantine" / "notes.txt"), "junk");
  EXPECT_EQ(readAll(root / "blocks" / ".quarantine" / "notes.txt.1"), "more junk");
}

TEST_F(BlockStoreTest, ConcurrentWritersOfDifferentBlocks) {
  BlockStore store(root / "blocks");
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&store, t] {
      std::string data(100000 + t, static_cast<char>('a' + t));
      auto w = store.create("rdd_9_" + std::to_string(t));
      w->write(data.data(), data.size());
      w->commit(checksumOf(data));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store.count(), 8u);
  EXPECT_TRUE(store.remove("rdd_9_3"));
  EXPECT_FALSE(store.remove("rdd_9_3"));
  EXPECT_EQ(store.count(), 7u);
  EXPECT_FALSE(fs::exists(root / "blocks" / "rdd_9_3"));
}

// removeLater: the block is gone from the store at once and its id can be written again; a
// reader that has the old file open reads it to the end; the space is given back by the time
// the store is destroyed, and nothing of it is left in the directory.
TEST_F(BlockStoreTest, RemoveLaterForgetsAtOnceAndFreesTheSpaceBeforeTheStoreGoes) {
  const fs::path dir = root / "blocks";
  const std::string old_data(3 << 20, 'o');
  const std::string new_data(1 << 20, 'n');
  int reader = -1;
  {
    BlockStore store(dir);
    for (int i = 0; i < 20; ++i) {
      auto w = store.create("shuffle_0_" + std::to_string(i) + "_0");
      w->write(old_data.data(), old_data.size());
      w->commit(checksumOf(old_data));
    }
    reader = ::open((dir / "shuffle_0_7_0").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(reader, 0);
    for (int i = 0; i < 20; ++i) {
      EXPECT_TRUE(store.removeLater("shuffle_0_" + std::to_string(i) + "_0"));
    }
    EXPECT_FALSE(store.removeLater("shuffle_0_7_0")) << "already gone";
    EXPECT_FALSE(store.remove("shuffle_0_7_0"));
    EXPECT_EQ(store.count(), 0u);
    EXPECT_FALSE(store.find("shuffle_0_7_0"));
    EXPECT_FALSE(fs::exists(dir / "shuffle_0_7_0"));

    // The same id again, while the old file may still be waiting for its unlink.
    auto w = store.create("shuffle_0_7_0");
    w->write(new_data.data(), new_data.size());
    w->commit(checksumOf(new_data));
    ASSERT_TRUE(store.find("shuffle_0_7_0"));
    EXPECT_EQ(store.find("shuffle_0_7_0")->checksum, checksumOf(new_data));
  }
  // The store is gone: every removed file is unlinked, the new block stays.
  EXPECT_EQ(readAll(dir / "shuffle_0_7_0"), new_data);
  std::vector<std::string> incoming;
  for (const auto& entry : fs::directory_iterator(dir / ".incoming")) {
    incoming.push_back(entry.path().filename().string());
  }
  EXPECT_TRUE(incoming.empty()) << incoming.front();
  std::string old_read(old_data.size(), '\0');
  EXPECT_EQ(::pread(reader, old_read.data(), old_read.size(), 0),
            static_cast<ssize_t>(old_data.size()));
  EXPECT_EQ(old_read, old_data) << "an open reader keeps the removed block's bytes";
  ::close(reader);
}

TEST_F(BlockStoreTest, AlignedPiecesBypassThePageCacheAndTheTailDoesNot) {
  BlockStore store(root / "blocks");
  writeAlignedPiecesAndATail(store, "rdd_1_0", directIoWorksIn(store.dir()));
}

TEST_F(BlockStoreTest, WithoutDirectIoTheSameBytesGoThroughThePageCache) {
  testing::TmpfsMount disk(root / "ramfs", 0, "ramfs");  // tmpfs takes O_DIRECT since 6.6
  if (!disk.mounted()) GTEST_SKIP() << disk.error();
  BlockStore store(root / "ramfs" / "blocks");
  ASSERT_FALSE(directIoWorksIn(store.dir()));
  writeAlignedPiecesAndATail(store, "rdd_1_0", false);
}

TEST_F(BlockStoreTest, AnUnalignedFirstPieceSendsTheRestThroughThePageCache) {
  BlockStore store(root / "blocks");
  AlignedBuffer piece(64 << 10);
  std::fill(piece.data(), piece.data() + piece.size(), 'x');
  auto w = store.create("rdd_2_0");
  w->write("header", 6);
  EXPECT_FALSE(w->direct());
  w->write(piece.data(), piece.size());  // aligned in memory, but not in the file
  EXPECT_FALSE(w->direct());
  std::string all = "header" + std::string(piece.size(), 'x');
  w->commit(checksumOf(all));
  EXPECT_EQ(readAll(store.pathOf("rdd_2_0")), all);
}

TEST(AlignedBufferTest, IsAlignedAndRoundedUpToTheAlignment) {
  AlignedBuffer buffer(5000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % BlockStore::kDirectAlign, 0u);
  EXPECT_EQ(buffer.size(), 2 * BlockStore::kDirectAlign);
}

}  // namespace
}  // namespace dockhand::agent
