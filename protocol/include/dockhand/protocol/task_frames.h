// The two frames every task costs, written straight to text: the LaunchTask the driver sends
// and the StatusUpdate the agent answers with (and the latter read straight from text). They are
// the protocol's hot path (one of each per task, tens of thousands a second), and building a JSON
// tree only to print it was most of their cost: a tree of a LaunchTask is about 60 allocations, its
// text is one.
//
// The text is byte for byte what encodeEnvelope(makeMessage(message)) writes — members in the
// same (sorted) order, strings escaped by the same rules, invalid UTF-8 replaced the same way —
// so docs/protocol.md and the tree codec stay the one definition of these messages;
// tests/protocol/task_frames_test.cpp holds the two writers to each other, field by field and
// over thousands of generated messages. A field added to either message is added here too (the
// test's generator fills every field, so a missing one fails it).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "dockhand/protocol/messages.h"

namespace dockhand::protocol {

// {"body":{"task":{...}},"type":"LaunchTask"}
std::string encodeLaunchTask(const LaunchTask& message);

// {"body":{...},"type":"StatusUpdate"}
std::string encodeStatusUpdate(const StatusUpdate& message);

// A StatusUpdate frame read straight into its message, with no JSON tree: the driver's reactor
// reads one for every task, and the tree was most of what that cost. It reads only what
// decodeEnvelope and decodeBody<StatusUpdate> would read into the same message, and returns
// nullopt for anything else — another type, an id, an unknown or repeated key, a value the tree
// reader would convert, drop or refuse, a frame too large or too deep — so that the tree codec,
// the one place with the rules' messages, decides those. Every frame encodeStatusUpdate writes
// that the tree codec reads is read here (tests/protocol/status_sax_test.cpp holds the two readers
// to each other).
std::optional<StatusUpdate> readStatusUpdateFrame(std::string_view frame,
                                                  std::size_t max_frame_bytes);

}  // namespace dockhand::protocol
