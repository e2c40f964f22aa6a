// docs/protocol.md is the contract a driver is written from: this test reads it and holds it to
// the code. Every example frame (the fenced JSON blocks) must decode with the codec and mean
// what the text around it says: an ask carries an id, a reply answers an ask of its block and
// has that ask's reply shape, a section's examples are of its message, a block's location is
// <block_url>/blocks/<id>. The tables (messages, error codes, limits, exit codes) must list what
// the code has, no more and no less.
#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/exit_codes.h"
#include "dockhand/protocol/envelope.h"
#include "dockhand/protocol/messages.h"

namespace dockhand::protocol {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::string& protocolDoc() {
  static const std::string kText = readFile(DOCKHAND_SOURCE_DIR "/docs/protocol.md");
  return kText;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// One example frame of the page, with where it stands.
struct Example {
  std::string text;     // the frame, its continuation lines joined
  std::string section;  // the heading above it, e.g. "8.4 `RegisterExecutor`"
  int block = 0;        // which fenced block (frames of one block are one conversation)
  int line = 0;         // where it starts in the file
};

// Every frame of every ```json block that holds frames (objects with a "type"). A frame
// starts at a line that begins with "{"; indented lines continue it.
std::vector<Example> exampleFrames() {
  std::vector<Example> frames;
  std::string section;
  bool in_block = false;
  int block = 0;
  int number = 0;
  for (const std::string& line : lines(protocolDoc())) {
    ++number;
    if (!in_block && line.rfind('#', 0) == 0) {
      section = line.substr(line.find(' ') + 1);
      continue;
    }
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block && line == "```json";
      if (in_block) ++block;
      continue;
    }
    if (!in_block || line.empty()) continue;
    if (line.front() == '{') {
      frames.push_back(Example{line, section, block, number});
    } else if (!frames.empty() && frames.back().block == block) {
      frames.back().text += line;
    }
  }
  // A block of something else (a runner's payload) has no "type": not a frame.
  std::vector<Example> out;
  for (auto& frame : frames) {
    Json j = Json::parse(frame.text, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("type")) out.push_back(std::move(frame));
  }
  return out;
}

std::string where(const Example& e) {
  return "docs/protocol.md line " + std::to_string(e.line) + " (" + e.section + "): " + e.text;
}

// Decodes `body` as the body of message `type`; throws BodyError.
void decodeMessageBody(MessageType type, const Json& body) {
  switch (type) {
    case MessageType::kHello:
      decodeBody<Hello>(body);
      break;
    case MessageType::kRetrieveAppConfig:
      decodeBody<RetrieveAppConfig>(body);
      break;
    case MessageType::kRegisterExecutor:
      decodeBody<RegisterExecutor>(body);
      break;
    case MessageType::kLaunchedExecutor:
      decodeBody<LaunchedExecutor>(body);
      break;
    case MessageType::kLaunchTask:
      decodeBody<LaunchTask>(body);
      break;
    case MessageType::kKillTask:
      decodeBody<KillTask>(body);
      break;
    case MessageType::kStatusUpdate:
      decodeBody<StatusUpdate>(body);
      break;
    case MessageType::kStopExecutor:
      decodeBody<StopExecutor>(body);
      break;
    case MessageType::kShutdown:
      decodeBody<Shutdown>(body);
      break;
    case MessageType::kUpdateDelegationTokens:
      decodeBody<UpdateDelegationTokens>(body);
      break;
    case MessageType::kUpdateExecutorLogLevel:
      decodeBody<UpdateExecutorLogLevel>(body);
      break;
    case MessageType::kDecommissionExecutor:
      decodeBody<DecommissionExecutor>(body);
      break;
    case MessageType::kExecutorDecommissioning:
      decodeBody<ExecutorDecommissioning>(body);
      break;
    case MessageType::kTaskThreadDump:
      decodeBody<TaskThreadDump>(body);
      break;
    case MessageType::kRemoveExecutor:
      decodeBody<RemoveExecutor>(body);
      break;
    case MessageType::kHeartbeat:
      decodeBody<Heartbeat>(body);
      break;
    case MessageType::kGetPeers:
      decodeBody<GetPeers>(body);
      break;
    case MessageType::kUpdateBlockInfo:
      decodeBody<UpdateBlockInfo>(body);
      break;
    case MessageType::kAuthenticate:
      decodeBody<Authenticate>(body);
      break;
    case MessageType::kResumeExecutor:
      decodeBody<ResumeExecutor>(body);
      break;
  }
}

// Checks a successful reply's body against what section 8 says the ask's reply is.
void checkReplyBody(const Envelope& ask, const Envelope& reply, const Example& e) {
  const Json body = reply.body.is_null() ? Json::object() : reply.body;
  ASSERT_TRUE(body.is_object()) << where(e);
  switch (findMessage(ask.type)->type) {
    case MessageType::kHello: {
      const auto hello = decodeBody<Hello>(body);
      EXPECT_EQ(hello.role, "driver") << "the driver answers the agent's Hello: " << where(e);
      EXPECT_EQ(hello.protocol_version, kProtocolVersion) << where(e);
      break;
    }
    case MessageType::kRetrieveAppConfig:
      decodeBody<AppConfig>(body);
      break;
    case MessageType::kGetPeers:
      parsePeers(body);
      break;
    case MessageType::kRegisterExecutor:
    case MessageType::kAuthenticate:
      EXPECT_EQ(body, Json::object()) << "the reply body is {}: " << where(e);
      break;
    case MessageType::kExecutorDecommissioning:
      EXPECT_TRUE(!body.contains("accepted") || body["accepted"].is_boolean()) << where(e);
      break;
    case MessageType::kTaskThreadDump:
      EXPECT_EQ(body.value("task_id", Json()), ask.body["task_id"]) << where(e);
      break;
    case MessageType::kResumeExecutor:
      decodeBody<ResumeAccepted>(body);
      break;
    default:
      ADD_FAILURE() << ask.type << " is not an ask, yet it is answered: " << where(e);
  }
}

TEST(ProtocolDocTest, EveryExampleFrameDecodesAndMeansWhatTheTextSays) {
  const auto frames = exampleFrames();
  // The page has some 40 example frames: finding few means this test stopped reading them.
  ASSERT_GE(frames.size(), 35u);
  std::map<int, std::map<std::uint64_t, Envelope>> asks;  // block -> id -> ask
  for (const Example& e : frames) {
    auto decoded = decodeEnvelope(e.text);
    ASSERT_TRUE(decoded) << decoded.error().message << ": " << where(e);
    const Envelope& env = decoded.value();
    if (env.isError()) {
      EXPECT_TRUE(env.error.has_value()) << where(e);
      continue;
    }
    if (env.isReply()) {
      EXPECT_GT(env.re, 0u) << where(e);
      EXPECT_EQ(env.ok, !env.error.has_value()) << where(e);
      auto ask = asks[e.block].find(env.re);
      if (ask == asks[e.block].end()) {
        // A refusal may stand alone (it answers any ask); a successful reply must show its ask.
        EXPECT_FALSE(env.ok) << "a successful reply without its ask in the example: " << where(e);
        continue;
      }
      const MessageSpec* spec = findMessage(ask->second.type);
      if (env.ok) {
        EXPECT_TRUE(spec->ask) << "a one-way message is only ever answered by a refusal: "
                               << where(e);
        checkReplyBody(ask->second, env, e);
      }
      continue;
    }
    const MessageSpec* spec = findMessage(env.type);
    ASSERT_NE(spec, nullptr) << "not a message of section 8: " << where(e);
    try {
      decodeMessageBody(spec->type, env.body);
    } catch (const BodyError& error) {
      ADD_FAILURE() << "body does not decode: " << error.what() << ": " << where(e);
    }
    if (spec->ask) {
      EXPECT_GT(env.id, 0u) << "an ask carries an id > 0 (2.2): " << where(e);
    }
    if (env.id != 0) {
      EXPECT_EQ(asks[e.block].count(env.id), 0u) << "an id used twice in one example: " << where(e);
      asks[e.block][env.id] = env;
    }
  }
}

// Each "### 8.N `Name`" section's examples show that message (with the Hello it follows, in
// 8.20), and every message of the summary table has a section with an example.
TEST(ProtocolDocTest, EachMessageSectionShowsItsMessage) {
  std::set<std::string> shown;
  for (const Example& e : exampleFrames()) {
    std::smatch m;
    if (!std::regex_match(e.section, m, std::regex(R"(8\.\d+ `(\w+)`.*)"))) continue;
    const std::string name = m[1];
    auto env = decodeEnvelope(e.text);
    ASSERT_TRUE(env) << where(e);
    if (env->isReply() || env->isError()) continue;
    if (env->type == name) {
      shown.insert(name);
    } else {
      EXPECT_EQ(env->type, "Hello") << "an example of another message in " << where(e);
    }
  }
  for (const MessageSpec& spec : allMessages()) {
    EXPECT_EQ(shown.count(std::string(spec.name)), spec.name == "GetPeers" ? 0u : 1u)
        << spec.name << " has no example frame in its section";
  }
}

// The table rows of the section that starts with `heading` ("## 5. Error codes"): cells of
// each row after the header and the separator.
std::vector<std::vector<std::string>> tableAfter(const std::string& heading) {
  std::vector<std::vector<std::string>> rows;
  bool in_section = false;
  bool in_table = false;
  for (const std::string& line : lines(protocolDoc())) {
    if (line.rfind('#', 0) == 0) {
      if (in_section) break;
      in_section = line == heading;
      continue;
    }
    if (!in_section) continue;
    if (line.rfind('|', 0) != 0) {
      if (in_table) break;
      continue;
    }
    if (!in_table) {  // the header row; the separator follows
      in_table = true;
      continue;
    }
    if (line.rfind("|---", 0) == 0) continue;
    std::vector<std::string> cells;
    std::string cell;
    for (std::size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|') {
        while (!cell.empty() && cell.back() == ' ') cell.pop_back();
        cells.push_back(cell.substr(cell.find_first_not_of(' ') == std::string::npos
                                        ? cell.size()
                                        : cell.find_first_not_of(' ')));
        cell.clear();
      } else {
        cell += line[i];
      }
    }
    rows.push_back(cells);
  }
  EXPECT_FALSE(rows.empty()) << "no table under " << heading;
  return rows;
}

std::string unquote(const std::string& cell) {
  if (cell.size() >= 2 && cell.front() == '`' && cell.back() == '`') {
    return cell.substr(1, cell.size() - 2);
  }
  return cell;
}

TEST(ProtocolDocTest, SummaryTableListsEveryMessageWithTheCodecsDirectionAndKind) {
  std::set<std::string> listed;
  for (const auto& row : tableAfter("### 8.1 Summary")) {
    ASSERT_GE(row.size(), 5u);
    const std::string name = unquote(row[0]);
    listed.insert(name);
    const MessageSpec* spec = findMessage(name);
    ASSERT_NE(spec, nullptr) << name << " is in the table but not in the codec";
    EXPECT_EQ(row[2] == "yes", spec->ask) << name << ": ask column says " << row[2];
    Direction direction = Direction::kBoth;
    if (row[1].rfind("both", 0) != 0 && row[1].find("either side") == std::string::npos) {
      direction =
          row[1].rfind("agent", 0) == 0 ? Direction::kAgentToDriver : Direction::kDriverToAgent;
    }
    EXPECT_EQ(direction, spec->direction) << name << ": direction column says " << row[1];
    // Its section is there, under that number.
    const std::string heading = "### " + row[4] + " `" + name + "`";
    EXPECT_NE(protocolDoc().find("\n" + heading), std::string::npos) << "no " << heading;
  }
  for (const MessageSpec& spec : allMessages()) {
    EXPECT_EQ(listed.count(std::string(spec.name)), 1u) << spec.name << " is not in 8.1";
  }
}

TEST(ProtocolDocTest, ErrorCodeTableIsTheCodecsAndExamplesUseOnlyItsCodes) {
  namespace ec = error_code;
  const std::set<std::string> codec = {
      std::string(ec::kMalformedFrame),    std::string(ec::kFrameTooLarge),
      std::string(ec::kUnknownType),       std::string(ec::kInvalidBody),
      std::string(ec::kUnexpectedMessage), std::string(ec::kProtocolVersion),
      std::string(ec::kDuplicateExecutor), std::string(ec::kRegistrationRefused),
      std::string(ec::kNotRegistered),     std::string(ec::kUnknownTask),
      std::string(ec::kTimeout),           std::string(ec::kDisconnected),
      std::string(ec::kInternal),          std::string(ec::kAuthFailed),
      std::string(ec::kNotResumable)};
  std::set<std::string> table;
  for (const auto& row : tableAfter("## 5. Error codes")) table.insert(unquote(row.at(0)));
  EXPECT_EQ(table, codec);
  for (const Example& e : exampleFrames()) {
    auto env = decodeEnvelope(e.text);
    ASSERT_TRUE(env) << where(e);
    if (env->error) {
      EXPECT_EQ(table.count(env->error->code), 1u) << where(e);
    }
  }
}

TEST(ProtocolDocTest, LimitsAreTheCodecs) {
  const auto rows = tableAfter("## 4. Limits");
  ASSERT_EQ(rows.size(), 3u);
  std::string frame = rows[0].at(1);
  frame = frame.substr(frame.find('(') + 1);
  frame.erase(std::remove(frame.begin(), frame.end(), ' '), frame.end());
  EXPECT_EQ(std::stoull(frame), kDefaultMaxFrameBytes) << rows[0].at(1);
  EXPECT_EQ(std::stoull(rows[1].at(1)), kMaxNestingDepth) << rows[1].at(1);
  // The type-length limit: the codec refuses one character more than the page allows.
  const std::size_t type_limit = std::stoull(rows[2].at(1));
  const std::string longest(type_limit, 'T');
  EXPECT_TRUE(decodeEnvelope(R"({"type":")" + longest + R"("})"));
  EXPECT_FALSE(decodeEnvelope(R"({"type":")" + longest + R"(T"})"));
}

TEST(ProtocolDocTest, ExitCodeTableIsTheAgents) {
  std::map<int, std::string> table;
  for (const auto& row : tableAfter("## 9. Agent exit codes")) {
    table[std::stoi(row.at(0))] = unquote(row.at(1));
  }
  std::map<int, std::string> agent;
  for (const auto& info : agent::kExitCodeTable) {
    agent[agent::toInt(info.code)] = std::string(info.name);
  }
  EXPECT_EQ(table, agent);
}

// 8.4: block_url is scheme://host:port with no trailing "/", and a block lives at
// <block_url>/blocks/<id> (8.19): no example may show otherwise, nor the page "//blocks".
TEST(ProtocolDocTest, BlockUrlsHaveNoTrailingSlashAndLocationsAreBlockUrlSlashBlocksSlashId) {
  int block_urls = 0;
  int locations = 0;
  std::function<void(const Json&, const Example&)> visit = [&](const Json& j, const Example& e) {
    if (j.is_object()) {
      for (const auto& [key, value] : j.items()) {
        if (key == "block_url" && value.is_string()) {
          ++block_urls;
          const auto url = value.get<std::string>();
          EXPECT_TRUE(std::regex_match(url, std::regex(R"(https?://[^/]+)"))) << where(e);
        }
        visit(value, e);
      }
      if (j.contains("url") && j.contains("id") && j["url"].is_string()) {
        ++locations;
        const auto url = j["url"].get<std::string>();
        const auto id = j["id"].get<std::string>();
        EXPECT_TRUE(std::regex_match(url, std::regex(R"(https?://[^/]+/blocks/)" + id)) ||
                    url == "fallback:" + id)
            << where(e);
      }
    } else if (j.is_array()) {
      for (const auto& item : j) visit(item, e);
    }
  };
  for (const Example& e : exampleFrames()) visit(Json::parse(e.text), e);
  EXPECT_GE(block_urls, 1);
  EXPECT_GE(locations, 1);
  EXPECT_EQ(protocolDoc().find("//blocks"), std::string::npos);
  // The codec drops a trailing "/" a sender added, so "//blocks" cannot come of one.
  const auto registered = decodeBody<RegisterExecutor>(
      Json::parse(R"({"executor_id":"e","hostname":"h","cores":1,"block_url":"http://h:1/"})"));
  EXPECT_EQ(registered.block_url, "http://h:1");
  const auto peers =
      parsePeers(Json::parse(R"({"peers":[{"executor_id":"e","block_url":"http://h:1//"}]})"));
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].block_url, "http://h:1");
}

// 7.4 gives the process runner's failure reason ("exited with code 3"); the StatusUpdate
// examples must use the same words, and so must the runner.
TEST(ProtocolDocTest, FailureReasonsAreTheProcessRunners) {
  const std::string runner =
      readFile(DOCKHAND_SOURCE_DIR "/plugins/process/src/process_runner.cpp");
  ASSERT_NE(runner.find(R"("exited with code ")"), std::string::npos);
  ASSERT_NE(protocolDoc().find(R"((`"exited with code 3"`))"), std::string::npos);
  int failed = 0;
  for (const Example& e : exampleFrames()) {
    auto env = decodeEnvelope(e.text);
    ASSERT_TRUE(env) << where(e);
    if (env->type != "StatusUpdate") continue;
    const auto update = decodeBody<StatusUpdate>(env->body);
    if (update.state != TaskState::kFailed || !update.exit_code) continue;
    ++failed;
    EXPECT_EQ(update.reason, "exited with code " + std::to_string(*update.exit_code)) << where(e);
  }
  EXPECT_GE(failed, 1);
}

}  // namespace
}  // namespace dockhand::protocol
