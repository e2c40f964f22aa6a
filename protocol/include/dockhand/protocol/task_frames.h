// The two frames every task costs, written straight to text: the LaunchTask the driver sends
// and the StatusUpdate the agent answers with. They are the protocol's hot path (one of each
// per task, tens of thousands a second), and building a JSON tree only to print it was most of
// their cost: a tree of a LaunchTask is about 60 allocations, its text is one.
//
// The text is byte for byte what encodeEnvelope(makeMessage(message)) writes — members in the
// same (sorted) order, strings escaped by the same rules, invalid UTF-8 replaced the same way —
// so docs/protocol.md and the tree codec stay the one definition of these messages;
// tests/protocol/task_frames_test.cpp holds the two writers to each other, field by field and
// over thousands of generated messages. A field added to either message is added here too (the
// test's generator fills every field, so a missing one fails it).
#pragma once

#include <string>

#include "dockhand/protocol/messages.h"

namespace dockhand::protocol {

// {"body":{"task":{...}},"type":"LaunchTask"}
std::string encodeLaunchTask(const LaunchTask& message);

// {"body":{...},"type":"StatusUpdate"}
std::string encodeStatusUpdate(const StatusUpdate& message);

}  // namespace dockhand::protocol
