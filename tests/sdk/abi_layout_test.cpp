// The ABI change guard: the layout of every struct in dockhand/plugin.h, recorded per ABI
// version. When the header changes, this test fails until the change is recorded here, and
// it refuses a record that breaks the versioning rule:
//   - at the same version, nothing may change (bump DH_ABI_MINOR when you append);
//   - a new minor may only append fields (every field of the previous minor keeps its offset,
//     and the struct grows);
//   - anything else needs a new DH_ABI_MAJOR.
// To record a new minor: bump DH_ABI_MINOR in plugin.h, append the new fields, copy the last
// record below with the new minor and add the new fields with their offsets.
#include <cstddef>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dockhand/plugin.h"

namespace {

struct Field {
  std::string name;
  std::size_t offset;
};
struct StructLayout {
  std::string name;
  std::size_t size;
  std::vector<Field> fields;
};
struct AbiRecord {
  int major;
  int minor;
  std::vector<StructLayout> structs;
};

// Recorded on x86_64 / aarch64 Linux (LP64). Do not edit a published record.
const std::vector<AbiRecord>& records() {
  static const std::vector<AbiRecord> kRecords = {
      {1,
       0,
       {{"dh_host",
         48,
         {{"struct_size", 0},
          {"ctx", 8},
          {"log", 16},
          {"task_status", 24},
          {"migration_progress", 32},
          {"config", 40}}},
        {"dh_resource_discovery_vtable",
         40,
         {{"struct_size", 0},
          {"discover", 8},
          {"allocate", 16},
          {"release", 24},
          {"describe", 32}}},
        {"dh_task_runner_vtable",
         32,
         {{"struct_size", 0}, {"launch", 8}, {"kill", 16}, {"thread_dump", 24}}},
        {"dh_block_migration_vtable", 24, {{"struct_size", 0}, {"migrate", 8}, {"cancel", 16}}},
        {"dh_plugin_descriptor",
         96,
         {{"struct_size", 0},
          {"abi_major", 4},
          {"abi_minor", 6},
          {"name", 8},
          {"version", 16},
          {"description", 24},
          {"kinds", 32},
          {"config_schema", 40},
          {"create", 48},
          {"destroy", 56},
          {"last_error", 64},
          {"resource_discovery", 72},
          {"task_runner", 80},
          {"block_migration", 88}}}}},
      {1,
       1,
       {{"dh_host",
         56,
         {{"struct_size", 0},
          {"ctx", 8},
          {"log", 16},
          {"task_status", 24},
          {"migration_progress", 32},
          {"config", 40},
          {"log_enabled", 48}}},
        {"dh_resource_discovery_vtable",
         40,
         {{"struct_size", 0},
          {"discover", 8},
          {"allocate", 16},
          {"release", 24},
          {"describe", 32}}},
        {"dh_task_runner_vtable",
         40,
         {{"struct_size", 0},
          {"launch", 8},
          {"kill", 16},
          {"thread_dump", 24},
          {"task_stats", 32}}},
        {"dh_block_migration_vtable", 24, {{"struct_size", 0}, {"migrate", 8}, {"cancel", 16}}},
        {"dh_plugin_descriptor",
         96,
         {{"struct_size", 0},
          {"abi_major", 4},
          {"abi_minor", 6},
          {"name", 8},
          {"version", 16},
          {"description", 24},
          {"kinds", 32},
          {"config_schema", 40},
          {"create", 48},
          {"destroy", 56},
          {"last_error", 64},
          {"resource_discovery", 72},
          {"task_runner", 80},
          {"block_migration", 88}}}}},
      {1,
       2,
       {{"dh_host",
         64,
         {{"struct_size", 0},
          {"ctx", 8},
          {"log", 16},
          {"task_status", 24},
          {"migration_progress", 32},
          {"config", 40},
          {"log_enabled", 48},
          {"sign_request", 56}}},
        {"dh_resource_discovery_vtable",
         40,
         {{"struct_size", 0},
          {"discover", 8},
          {"allocate", 16},
          {"release", 24},
          {"describe", 32}}},
        {"dh_task_runner_vtable",
         40,
         {{"struct_size", 0},
          {"launch", 8},
          {"kill", 16},
          {"thread_dump", 24},
          {"task_stats", 32}}},
        {"dh_block_migration_vtable", 24, {{"struct_size", 0}, {"migrate", 8}, {"cancel", 16}}},
        {"dh_plugin_descriptor",
         96,
         {{"struct_size", 0},
          {"abi_major", 4},
          {"abi_minor", 6},
          {"name", 8},
          {"version", 16},
          {"description", 24},
          {"kinds", 32},
          {"config_schema", 40},
          {"create", 48},
          {"destroy", 56},
          {"last_error", 64},
          {"resource_discovery", 72},
          {"task_runner", 80},
          {"block_migration", 88}}}}},
      {1,
       3,
       {{"dh_host",
         72,
         {{"struct_size", 0},
          {"ctx", 8},
          {"log", 16},
          {"task_status", 24},
          {"migration_progress", 32},
          {"config", 40},
          {"log_enabled", 48},
          {"sign_request", 56},
          {"unrecoverable", 64}}},
        {"dh_resource_discovery_vtable",
         40,
         {{"struct_size", 0},
          {"discover", 8},
          {"allocate", 16},
          {"release", 24},
          {"describe", 32}}},
        {"dh_task_runner_vtable",
         40,
         {{"struct_size", 0},
          {"launch", 8},
          {"kill", 16},
          {"thread_dump", 24},
          {"task_stats", 32}}},
        {"dh_block_migration_vtable", 24, {{"struct_size", 0}, {"migrate", 8}, {"cancel", 16}}},
        {"dh_plugin_descriptor",
         96,
         {{"struct_size", 0},
          {"abi_major", 4},
          {"abi_minor", 6},
          {"name", 8},
          {"version", 16},
          {"description", 24},
          {"kinds", 32},
          {"config_schema", 40},
          {"create", 48},
          {"destroy", 56},
          {"last_error", 64},
          {"resource_discovery", 72},
          {"task_runner", 80},
          {"block_migration", 88}}}}},
      {1,
       4,
       {{"dh_host",
         72,
         {{"struct_size", 0},
          {"ctx", 8},
          {"log", 16},
          {"task_status", 24},
          {"migration_progress", 32},
          {"config", 40},
          {"log_enabled", 48},
          {"sign_request", 56},
          {"unrecoverable", 64}}},
        {"dh_resource_discovery_vtable",
         40,
         {{"struct_size", 0},
          {"discover", 8},
          {"allocate", 16},
          {"release", 24},
          {"describe", 32}}},
        {"dh_task_runner_vtable",
         48,
         {{"struct_size", 0},
          {"launch", 8},
          {"kill", 16},
          {"thread_dump", 24},
          {"task_stats", 32},
          {"flags", 40}}},
        {"dh_block_migration_vtable", 24, {{"struct_size", 0}, {"migrate", 8}, {"cancel", 16}}},
        {"dh_plugin_descriptor",
         96,
         {{"struct_size", 0},
          {"abi_major", 4},
          {"abi_minor", 6},
          {"name", 8},
          {"version", 16},
          {"description", 24},
          {"kinds", 32},
          {"config_schema", 40},
          {"create", 48},
          {"destroy", 56},
          {"last_error", 64},
          {"resource_discovery", 72},
          {"task_runner", 80},
          {"block_migration", 88}}}}},
      {1,
       5,
       {{"dh_host",
         72,
         {{"struct_size", 0},
          {"ctx", 8},
          {"log", 16},
          {"task_status", 24},
          {"migration_progress", 32},
          {"config", 40},
          {"log_enabled", 48},
          {"sign_request", 56},
          {"unrecoverable", 64}}},
        {"dh_resource_discovery_vtable",
         40,
         {{"struct_size", 0},
          {"discover", 8},
          {"allocate", 16},
          {"release", 24},
          {"describe", 32}}},
        {"dh_task_runner_vtable",
         56,
         {{"struct_size", 0},
          {"launch", 8},
          {"kill", 16},
          {"thread_dump", 24},
          {"task_stats", 32},
          {"flags", 40},
          {"try_launch", 48}}},
        {"dh_block_migration_vtable", 24, {{"struct_size", 0}, {"migrate", 8}, {"cancel", 16}}},
        {"dh_plugin_descriptor",
         96,
         {{"struct_size", 0},
          {"abi_major", 4},
          {"abi_minor", 6},
          {"name", 8},
          {"version", 16},
          {"description", 24},
          {"kinds", 32},
          {"config_schema", 40},
          {"create", 48},
          {"destroy", 56},
          {"last_error", 64},
          {"resource_discovery", 72},
          {"task_runner", 80},
          {"block_migration", 88}}}}},
      {1,
       6,
       {{"dh_host",
         72,
         {{"struct_size", 0},
          {"ctx", 8},
          {"log", 16},
          {"task_status", 24},
          {"migration_progress", 32},
          {"config", 40},
          {"log_enabled", 48},
          {"sign_request", 56},
          {"unrecoverable", 64}}},
        {"dh_resource_discovery_vtable",
         40,
         {{"struct_size", 0},
          {"discover", 8},
          {"allocate", 16},
          {"release", 24},
          {"describe", 32}}},
        {"dh_task_runner_vtable",
         72,
         {{"struct_size", 0},
          {"launch", 8},
          {"kill", 16},
          {"thread_dump", 24},
          {"task_stats", 32},
          {"flags", 40},
          {"try_launch", 48},
          {"detach", 56},
          {"adopt", 64}}},
        {"dh_block_migration_vtable", 24, {{"struct_size", 0}, {"migrate", 8}, {"cancel", 16}}},
        {"dh_plugin_descriptor",
         96,
         {{"struct_size", 0},
          {"abi_major", 4},
          {"abi_minor", 6},
          {"name", 8},
          {"version", 16},
          {"description", 24},
          {"kinds", 32},
          {"config_schema", 40},
          {"create", 48},
          {"destroy", 56},
          {"last_error", 64},
          {"resource_discovery", 72},
          {"task_runner", 80},
          {"block_migration", 88}}}}},
      {1,
       7,
       {{"dh_host",
         80,
         {{"struct_size", 0},
          {"ctx", 8},
          {"log", 16},
          {"task_status", 24},
          {"migration_progress", 32},
          {"config", 40},
          {"log_enabled", 48},
          {"sign_request", 56},
          {"unrecoverable", 64},
          {"verify_code", 72}}},
        {"dh_resource_discovery_vtable",
         40,
         {{"struct_size", 0},
          {"discover", 8},
          {"allocate", 16},
          {"release", 24},
          {"describe", 32}}},
        {"dh_task_runner_vtable",
         72,
         {{"struct_size", 0},
          {"launch", 8},
          {"kill", 16},
          {"thread_dump", 24},
          {"task_stats", 32},
          {"flags", 40},
          {"try_launch", 48},
          {"detach", 56},
          {"adopt", 64}}},
        {"dh_block_migration_vtable", 24, {{"struct_size", 0}, {"migrate", 8}, {"cancel", 16}}},
        {"dh_plugin_descriptor",
         96,
         {{"struct_size", 0},
          {"abi_major", 4},
          {"abi_minor", 6},
          {"name", 8},
          {"version", 16},
          {"description", 24},
          {"kinds", 32},
          {"config_schema", 40},
          {"create", 48},
          {"destroy", 56},
          {"last_error", 64},
          {"resource_discovery", 72},
          {"task_runner", 80},
          {"block_migration", 88}}}}},
  };
  return kRecords;
}

#define DH_FIELD(type, field) \
  Field { #field, offsetof(type, field) }

// The layout of the header as compiled now.
std::vector<StructLayout> currentLayout() {
  return {
      {"dh_host",
       sizeof(dh_host),
       {DH_FIELD(dh_host, struct_size), DH_FIELD(dh_host, ctx), DH_FIELD(dh_host, log),
        DH_FIELD(dh_host, task_status), DH_FIELD(dh_host, migration_progress),
        DH_FIELD(dh_host, config), DH_FIELD(dh_host, log_enabled), DH_FIELD(dh_host, sign_request),
        DH_FIELD(dh_host, unrecoverable), DH_FIELD(dh_host, verify_code)}},
      {"dh_resource_discovery_vtable",
       sizeof(dh_resource_discovery_vtable),
       {DH_FIELD(dh_resource_discovery_vtable, struct_size),
        DH_FIELD(dh_resource_discovery_vtable, discover),
        DH_FIELD(dh_resource_discovery_vtable, allocate),
        DH_FIELD(dh_resource_discovery_vtable, release),
        DH_FIELD(dh_resource_discovery_vtable, describe)}},
      {"dh_task_runner_vtable",
       sizeof(dh_task_runner_vtable),
       {DH_FIELD(dh_task_runner_vtable, struct_size), DH_FIELD(dh_task_runner_vtable, launch),
        DH_FIELD(dh_task_runner_vtable, kill), DH_FIELD(dh_task_runner_vtable, thread_dump),
        DH_FIELD(dh_task_runner_vtable, task_stats), DH_FIELD(dh_task_runner_vtable, flags),
        DH_FIELD(dh_task_runner_vtable, try_launch), DH_FIELD(dh_task_runner_vtable, detach),
        DH_FIELD(dh_task_runner_vtable, adopt)}},
      {"dh_block_migration_vtable",
       sizeof(dh_block_migration_vtable),
       {DH_FIELD(dh_block_migration_vtable, struct_size),
        DH_FIELD(dh_block_migration_vtable, migrate), DH_FIELD(dh_block_migration_vtable, cancel)}},
      {"dh_plugin_descriptor",
       sizeof(dh_plugin_descriptor),
       {DH_FIELD(dh_plugin_descriptor, struct_size), DH_FIELD(dh_plugin_descriptor, abi_major),
        DH_FIELD(dh_plugin_descriptor, abi_minor), DH_FIELD(dh_plugin_descriptor, name),
        DH_FIELD(dh_plugin_descriptor, version), DH_FIELD(dh_plugin_descriptor, description),
        DH_FIELD(dh_plugin_descriptor, kinds), DH_FIELD(dh_plugin_descriptor, config_schema),
        DH_FIELD(dh_plugin_descriptor, create), DH_FIELD(dh_plugin_descriptor, destroy),
        DH_FIELD(dh_plugin_descriptor, last_error),
        DH_FIELD(dh_plugin_descriptor, resource_discovery),
        DH_FIELD(dh_plugin_descriptor, task_runner),
        DH_FIELD(dh_plugin_descriptor, block_migration)}},
  };
}

std::string describe(const StructLayout& s) {
  std::string out = s.name + " (size " + std::to_string(s.size) + "):";
  for (const auto& f : s.fields) out += " " + f.name + "@" + std::to_string(f.offset);
  return out;
}

TEST(AbiLayoutTest, HeaderMatchesTheRecordOfItsVersion) {
  static_assert(sizeof(void*) == 8, "the records are for LP64 targets");
  const AbiRecord* record = nullptr;
  for (const auto& r : records()) {
    if (r.major == DH_ABI_MAJOR && r.minor == DH_ABI_MINOR) record = &r;
  }
  ASSERT_NE(record, nullptr) << "no layout recorded for ABI " << DH_ABI_MAJOR << "." << DH_ABI_MINOR
                             << ": record it in " << __FILE__;
  const auto now = currentLayout();
  ASSERT_EQ(now.size(), record->structs.size());
  for (std::size_t i = 0; i < now.size(); ++i) {
    EXPECT_EQ(describe(now[i]), describe(record->structs[i]))
        << "plugin.h changed the layout of " << now[i].name << " without a version bump: "
        << "append fields only and bump DH_ABI_MINOR (then record the new layout here), or "
        << "bump DH_ABI_MAJOR";
  }
}

TEST(AbiLayoutTest, EveryMinorOnlyAppendsToThePreviousOne) {
  const auto& all = records();
  for (std::size_t r = 1; r < all.size(); ++r) {
    const AbiRecord& before = all[r - 1];
    const AbiRecord& after = all[r];
    if (after.major != before.major) continue;  // a new major may change anything
    ASSERT_EQ(after.minor, before.minor + 1) << "minors are recorded in order";
    ASSERT_EQ(after.structs.size(), before.structs.size()) << "a struct was removed or added";
    for (std::size_t i = 0; i < before.structs.size(); ++i) {
      const StructLayout& old_s = before.structs[i];
      const StructLayout& new_s = after.structs[i];
      EXPECT_EQ(new_s.name, old_s.name);
      EXPECT_GE(new_s.size, old_s.size)
          << new_s.name << " shrank in " << after.major << "." << after.minor;
      ASSERT_GE(new_s.fields.size(), old_s.fields.size()) << new_s.name << " lost a field";
      for (std::size_t f = 0; f < old_s.fields.size(); ++f) {
        EXPECT_EQ(new_s.fields[f].name, old_s.fields[f].name)
            << new_s.name << ": a field was renamed or inserted before the end";
        EXPECT_EQ(new_s.fields[f].offset, old_s.fields[f].offset)
            << new_s.name << "." << new_s.fields[f].name << " moved";
      }
      for (std::size_t f = old_s.fields.size(); f < new_s.fields.size(); ++f) {
        EXPECT_GE(new_s.fields[f].offset, old_s.size)
            << new_s.name << "." << new_s.fields[f].name << " is not appended at the end";
      }
    }
  }
}

TEST(AbiLayoutTest, StructSizeComesFirstInEveryTable) {
  for (const auto& s : currentLayout()) {
    ASSERT_FALSE(s.fields.empty());
    EXPECT_EQ(s.fields.front().name, "struct_size") << s.name;
    EXPECT_EQ(s.fields.front().offset, 0u) << s.name;
  }
}

}  // namespace
