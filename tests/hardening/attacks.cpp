#include "attacks.h"

#include "datachannel/net/auth.h"
#include "fault_checks.h"
#include "raw_peer.h"
#include "test_util.h"

namespace thd::test {

namespace {

constexpr milliseconds kRefusedWithin{5000};

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

std::vector<uint8_t> joined(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

std::string attack_name(Attack attack) {
  switch (attack) {
    case Attack::Garbage: return "Garbage";
    case Attack::NoHandshake: return "NoHandshake";
    case Attack::WrongToken: return "WrongToken";
    case Attack::Replay: return "Replay";
  }
  return "?";
}

::testing::AssertionResult refused(uint16_t port, Attack attack, const std::vector<uint8_t>& request,
                                   const std::vector<uint8_t>& recorded) {
  net::Socket s = connect_raw(port);
  const std::string name = attack_name(attack);
  switch (attack) {
    case Attack::Garbage:
      // Sending may fail once the listener has hung up: that is a refusal too.
      send_raw(s, joined(bytes_of("GET / HTTP/1.1\r\nHost: thd\r\n\r\n" + std::string(200, 'x')), request));
      break;
    case Attack::NoHandshake:
      send_raw(s, request);
      break;
    case Attack::WrongToken:
      try {
        net::client_handshake(s, net::AuthToken("not-the-job-token", "the attacker"), net::deadline_after(kRefusedWithin),
                              "attacker");
        return ::testing::AssertionFailure() << name << ": a client with the wrong token completed the handshake";
      } catch (const AuthError&) {
      } catch (const std::exception& e) {
        return ::testing::AssertionFailure() << name << ": expected an AuthError, got " << e.what();
      }
      send_raw(s, request);  // whatever follows a refused handshake must never be read
      break;
    case Attack::Replay: {
      if (recorded.size() < net::kClientHelloBytes) {
        return ::testing::AssertionFailure() << name << ": only " << recorded.size() << " bytes were recorded";
      }
      const std::vector<uint8_t> hello = recv_up_to(s, net::kServerHelloBytes, kRefusedWithin);
      if (hello.size() != net::kServerHelloBytes) {
        return ::testing::AssertionFailure() << name << ": the listener sent no ServerHello";
      }
      send_raw(s, joined(recorded, request));
      const std::vector<uint8_t> status = recv_up_to(s, 1, kRefusedWithin);
      if (status.empty() || status[0] != static_cast<uint8_t>(net::HandshakeStatus::BadProof)) {
        return ::testing::AssertionFailure() << name << ": the replayed proof was not refused as a bad proof (status "
                                             << (status.empty() ? -1 : int(status[0])) << ")";
      }
      break;
    }
  }
  if (!closed_by_peer(s, kRefusedWithin)) {
    return ::testing::AssertionFailure() << name << ": the connection is still open " << kRefusedWithin.count()
                                         << " ms later";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace thd::test
