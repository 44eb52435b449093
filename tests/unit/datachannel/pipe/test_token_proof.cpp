// The token proof alone: two ranks' hellos, made and judged without a pipe.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thd/error.h>
#include <thd/store.h>

#include "datachannel/pipe/token_proof.h"

namespace thd::detail::pipe {
namespace {

net::Nonce nonce_of(uint8_t fill) {
  net::Nonce n;
  n.fill(fill);
  return n;
}

// Ranks 0 and 1 of a world of two, each knowing the other's nonce.
struct Pair {
  Pair(const std::string& token0, const std::string& token1)
      : a(0, 2, net::AuthToken(token0, "test"), nonce_of(1)), b(1, 2, net::AuthToken(token1, "test"), nonce_of(2)) {
    a.set_peer_nonce(1, nonce_of(2));
    b.set_peer_nonce(0, nonce_of(1));
  }
  TokenProof a;
  TokenProof b;
};

TEST(TokenProof, RanksWithOneTokenProveItToEachOther) {
  Pair p("secret", "secret");
  EXPECT_FALSE(p.a.proved(1));
  EXPECT_TRUE(p.a.check_hello(1, p.b.hello_for(0)));
  EXPECT_TRUE(p.b.check_hello(0, p.a.hello_for(1)));
  EXPECT_TRUE(p.a.proved(1));
  EXPECT_TRUE(p.b.proved(0));
  EXPECT_FALSE(p.a.refused(1));
}

TEST(TokenProof, AnotherTokenIsRefusedOnBothSides) {
  Pair p("secret", "another");
  EXPECT_FALSE(p.a.check_hello(1, p.b.hello_for(0)));
  EXPECT_FALSE(p.b.check_hello(0, p.a.hello_for(1)));
  EXPECT_FALSE(p.a.proved(1));
  EXPECT_NE(p.a.refusal(1).find("rank 1 does not hold this job's token"), std::string::npos) << p.a.refusal(1);
  EXPECT_NE(p.b.refusal(0).find("rank 0 does not hold this job's token"), std::string::npos) << p.b.refusal(0);
}

TEST(TokenProof, AProofForOtherNoncesDoesNotVerify) {
  // A hello recorded from another run (other nonces) is no proof in this one.
  Pair p("secret", "secret");
  TokenProof earlier(1, 2, net::AuthToken("secret", "test"), nonce_of(9));
  earlier.set_peer_nonce(0, nonce_of(1));
  EXPECT_FALSE(p.a.check_hello(1, earlier.hello_for(0)));
  EXPECT_NE(p.a.refusal(1).find("did not verify"), std::string::npos) << p.a.refusal(1);
}

TEST(TokenProof, AHelloClaimingAnotherRankIsRefused) {
  // Rank 2's valid hello to rank 0, arriving from rank 1.
  TokenProof a(0, 3, net::AuthToken("secret", "test"), nonce_of(1));
  TokenProof c(2, 3, net::AuthToken("secret", "test"), nonce_of(3));
  c.set_peer_nonce(0, nonce_of(1));
  EXPECT_FALSE(a.check_hello(1, c.hello_for(0)));
  EXPECT_NE(a.refusal(1).find("claiming to be rank 2"), std::string::npos) << a.refusal(1);
}

TEST(TokenProof, AnythingButAHelloFirstIsRefusedNamingItsSize) {
  Pair p("secret", "secret");
  const std::vector<uint8_t> message(48, 0);
  EXPECT_FALSE(p.a.check_hello(1, message));
  EXPECT_EQ(p.a.refusal(1), "rank 1 sent a 48-byte message before proving the token");
  std::vector<uint8_t> wrong_magic = p.b.hello_for(0);
  wrong_magic[0] = 'x';
  EXPECT_FALSE(p.b.check_hello(0, std::vector<uint8_t>{}));
  EXPECT_FALSE(p.a.check_hello(1, wrong_magic));
}

TEST(TokenProof, ExchangeReadsThePeersNoncesAndIdentitiesThroughTheStore) {
  HashStore store(std::chrono::milliseconds(5000));
  TokenProof a(0, 2, net::AuthToken("secret", "test"));
  TokenProof b(1, 2, net::AuthToken("secret", "test"));
  std::vector<std::string> seen_by_b;
  std::thread other([&] { seen_by_b = b.exchange(store, std::chrono::milliseconds(5000), "who-b", "test"); });
  const auto seen_by_a = a.exchange(store, std::chrono::milliseconds(5000), "who-a", "test");
  other.join();
  EXPECT_EQ(seen_by_a, (std::vector<std::string>{"", "who-b"}));
  EXPECT_EQ(seen_by_b, (std::vector<std::string>{"who-a", ""}));
  EXPECT_TRUE(a.check_hello(1, b.hello_for(0)));
  EXPECT_TRUE(b.check_hello(0, a.hello_for(1)));
}

TEST(TokenProof, ExchangeNamesAPeerThatNeverPublished) {
  HashStore store(std::chrono::milliseconds(5000));
  TokenProof a(0, 2, net::AuthToken("secret", "test"));
  try {
    a.exchange(store, std::chrono::milliseconds(50), "", "ucx backend");
    FAIL() << "no TimeoutError";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 did not join within 50 ms"), std::string::npos) << e.what();
  }
}

TEST(TokenProof, ExchangeRefusesAMalformedNonce) {
  HashStore store(std::chrono::milliseconds(5000));
  store.set("pipe/nonce/1", std::vector<uint8_t>(5, 1));
  TokenProof a(0, 2, net::AuthToken("secret", "test"));
  EXPECT_THROW(a.exchange(store, std::chrono::milliseconds(1000), "", "test"), ConnectionError);
}

}  // namespace
}  // namespace thd::detail::pipe
