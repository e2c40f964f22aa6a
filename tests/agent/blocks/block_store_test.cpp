#include "blocks/block_store.h"

#include <unistd.h>

#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "blocks/checksum.h"

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
  // Entries of the store directory, the temporary area left out.
  std::vector<std::string> visibleFiles(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().filename() != ".incoming") out.push_back(e.path().filename().string());
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

TEST_F(BlockStoreTest, ConcurrentWritersOfDifferentBlocks) {
  BlockStore store(root / "blocks");
  std::vector<std::thread> threads;
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

}  // namespace
}  // namespace dockhand::agent
