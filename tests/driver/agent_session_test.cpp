// AgentSession: the handshake's order, what each state admits, and the moves it allows.
#include "dockhand/driver/agent_session.h"

#include <stdexcept>

#include <gtest/gtest.h>

namespace dockhand::driver {
namespace {

using protocol::MessageType;
using Kind = SessionRefusal::Kind;

TEST(AgentSessionTest, HelloComesFirstAndAnythingElseClosesTheConnection) {
  AgentSession s;
  EXPECT_FALSE(s.handshakeRefusal(MessageType::kHello, "Hello"));
  auto refusal = s.handshakeRefusal(MessageType::kRegisterExecutor, "RegisterExecutor");
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->kind, Kind::kClose);
  EXPECT_EQ(refusal->code, protocol::error_code::kUnexpectedMessage);
  EXPECT_EQ(refusal->message, "the first frame must be Hello, got RegisterExecutor");
  EXPECT_EQ(refusal->close_reason, "no Hello first");
}

TEST(AgentSessionTest, AnAuthenticatingSessionTakesOnlyAuthenticate) {
  AgentSession s;
  s.startAuthentication("aa", "bb");
  EXPECT_EQ(s.state(), SessionState::kAuthenticating);
  EXPECT_EQ(s.agentNonce(), "aa");
  EXPECT_FALSE(s.handshakeRefusal(MessageType::kAuthenticate, "Authenticate"));
  auto refusal = s.handshakeRefusal(MessageType::kHeartbeat, "Heartbeat");
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->kind, Kind::kAuthFail);
  EXPECT_EQ(refusal->code, protocol::error_code::kAuthFailed);
  s.greet();
  EXPECT_EQ(s.state(), SessionState::kGreeted);
  EXPECT_TRUE(s.agentNonce().empty()) << "the nonces are done with";
  auto again = s.admit(MessageType::kAuthenticate, "Authenticate", true);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->message, "Authenticate was already accepted on this connection");
  EXPECT_EQ(s.admit(MessageType::kAuthenticate, "Authenticate", false)->message,
            "this driver does not authenticate (it has no auth_secret_file)");
}

TEST(AgentSessionTest, WhatAGreetedAndARegisteredSessionAdmit) {
  AgentSession s;
  s.greet();
  EXPECT_EQ(s.admit(MessageType::kHello, "Hello", false)->message,
            "Hello was already exchanged on this connection");
  EXPECT_FALSE(s.admit(MessageType::kRetrieveAppConfig, "RetrieveAppConfig", false));
  EXPECT_FALSE(s.admit(MessageType::kRegisterExecutor, "RegisterExecutor", false));
  EXPECT_EQ(s.admit(MessageType::kHeartbeat, "Heartbeat", false)->kind, Kind::kIgnore);
  auto early = s.admit(MessageType::kStatusUpdate, "StatusUpdate", false);
  ASSERT_TRUE(early);
  EXPECT_EQ(early->code, protocol::error_code::kNotRegistered);
  EXPECT_EQ(early->message, "StatusUpdate before RegisterExecutor was accepted");

  s.bind("exec-1");
  EXPECT_TRUE(s.registered());
  EXPECT_EQ(s.agentId(), "exec-1");
  EXPECT_FALSE(s.admit(MessageType::kStatusUpdate, "StatusUpdate", false));
  EXPECT_FALSE(s.admit(MessageType::kHeartbeat, "Heartbeat", false));
  EXPECT_EQ(s.admit(MessageType::kResumeExecutor, "ResumeExecutor", false)->message,
            "this connection is already registered as 'exec-1'");

  s.unbind();  // RemoveExecutor
  EXPECT_EQ(s.state(), SessionState::kGreeted);
  EXPECT_EQ(s.agentId(), "");
}

TEST(AgentSessionTest, MovesOutsideTheMachineAreBugs) {
  EXPECT_TRUE(canMove(SessionState::kOpened, SessionState::kAuthenticating));
  EXPECT_TRUE(canMove(SessionState::kRegistered, SessionState::kGreeted));
  EXPECT_FALSE(canMove(SessionState::kOpened, SessionState::kRegistered));
  EXPECT_FALSE(canMove(SessionState::kAuthenticating, SessionState::kRegistered));
  EXPECT_FALSE(canMove(SessionState::kGreeted, SessionState::kOpened));
  AgentSession s;
  EXPECT_THROW(s.bind("exec-1"), std::logic_error) << "registered before any Hello";
  s.greet();
  EXPECT_THROW(s.startAuthentication("aa", "bb"), std::logic_error);
}

}  // namespace
}  // namespace dockhand::driver
