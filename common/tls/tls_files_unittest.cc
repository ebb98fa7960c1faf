// Reading and checking mutual-TLS PEM files (tls_files.h), with keys and certificates made here.
#include "common/tls/tls_files.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flopscope::tls {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct KeyAndCert {
  std::string key_pem;
  std::string cert_pem;
};

std::string ToPem(const std::function<int(BIO*)>& write) {
  BIO* bio = BIO_new(BIO_s_mem());
  write(bio);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(size));
  BIO_free(bio);
  return pem;
}

// A fresh EC key and a self-signed certificate for it with subject OU=<unit> (when given), CN=cn.
KeyAndCert MakeSelfSigned(const std::string& cn, const std::string& unit = "",
                          const std::string& second_cn = "") {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  auto add = [name](const char* field, const std::string& value) {
    X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0);
  };
  if (!unit.empty()) add("OU", unit);
  add("CN", cn);
  if (!second_cn.empty()) add("CN", second_cn);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  KeyAndCert made{ToPem([key](BIO* bio) {
                    return PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr,
                                                    nullptr);
                  }),
                  ToPem([cert](BIO* bio) { return PEM_write_bio_X509(bio, cert); })};
  X509_free(cert);
  EVP_PKEY_free(key);
  return made;
}

class TlsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/tls-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::string dir_;
};

TEST_F(TlsFilesTest, LoadsMatchingFiles) {
  const KeyAndCert mine = MakeSelfSigned("alice");
  const KeyAndCert ca = MakeSelfSigned("a CA");
  absl::StatusOr<TlsPem> pem = LoadTlsFiles(
      {Write("c.pem", mine.cert_pem), Write("k.pem", mine.key_pem), Write("ca.pem", ca.cert_pem)});
  ASSERT_TRUE(pem.ok()) << pem.status();
  EXPECT_EQ(pem->cert, mine.cert_pem);
  EXPECT_EQ(pem->key, mine.key_pem);
  EXPECT_EQ(pem->ca, ca.cert_pem);
}

TEST_F(TlsFilesTest, NamesTheFlagAndTheFix) {
  const KeyAndCert mine = MakeSelfSigned("alice");
  const KeyAndCert other = MakeSelfSigned("bob");
  const std::string cert = Write("c.pem", mine.cert_pem);
  const std::string key = Write("k.pem", mine.key_pem);
  const std::string ca = Write("ca.pem", other.cert_pem);

  EXPECT_THAT(LoadTlsFiles({cert, "", ca}).status().message(), HasSubstr("--tls-key is missing"));
  EXPECT_THAT(LoadTlsFiles({cert, key, dir_ + "/absent.pem"}).status().message(),
              HasSubstr("--tls-ca " + dir_ + "/absent.pem: cannot read it"));
  EXPECT_THAT(LoadTlsFiles({Write("junk.pem", "hello"), key, ca}).status().message(),
              HasSubstr("--tls-cert " + dir_ + "/junk.pem: not a PEM certificate"));
  EXPECT_THAT(LoadTlsFiles({cert, cert, ca}).status().message(),
              HasSubstr("not a PEM private key"));
  EXPECT_THAT(LoadTlsFiles({cert, Write("other.key", other.key_pem), ca}).status().message(),
              HasSubstr("is not the key of --tls-cert"));
  EXPECT_THAT(LoadTlsFiles({cert, key, Write("big.pem", std::string(kMaxPemBytes + 1, 'x'))})
                  .status()
                  .message(),
              HasSubstr("larger than"));
}

TEST(SubjectOfPemTest, ReadsCommonNameAndUnits) {
  absl::StatusOr<CertificateSubject> subject =
      SubjectOfPem(MakeSelfSigned("node-1", "flopscope-node").cert_pem);
  ASSERT_TRUE(subject.ok()) << subject.status();
  EXPECT_EQ(subject->common_name, "node-1");
  EXPECT_THAT(subject->organizational_units, ElementsAre("flopscope-node"));

  subject = SubjectOfPem(MakeSelfSigned("j\xc3\xa9r\xc3\xb4me").cert_pem);  // UTF-8 kept
  ASSERT_TRUE(subject.ok());
  EXPECT_EQ(subject->common_name, "j\xc3\xa9r\xc3\xb4me");
  EXPECT_TRUE(subject->organizational_units.empty());

  EXPECT_FALSE(SubjectOfPem("not a certificate").ok());
}

TEST(SubjectOfPemTest, GivesTheWholeSubjectForLogs) {
  absl::StatusOr<CertificateSubject> subject =
      SubjectOfPem(MakeSelfSigned("node-1", "flopscope-node").cert_pem);
  ASSERT_TRUE(subject.ok()) << subject.status();
  EXPECT_EQ(subject->one_line, "CN=node-1,OU=flopscope-node");
}

// Reliability campaign row 4m: `CN=rel3mal, CN=root` was read as root (the last CN won). A CA
// that checks only a request's first CN would hand anyone root's access that way.
TEST(SubjectOfPemTest, RefusesASubjectWithTwoCommonNames) {
  for (const auto& [first, second] : {std::pair{"mallory", "root"}, std::pair{"root", "mallory"}}) {
    absl::StatusOr<CertificateSubject> subject =
        SubjectOfPem(MakeSelfSigned(first, "", second).cert_pem);
    ASSERT_FALSE(subject.ok()) << first << "," << second << " read as " << subject->common_name;
    EXPECT_TRUE(absl::IsInvalidArgument(subject.status()));
    EXPECT_THAT(subject.status().message(), HasSubstr("has 2 CNs"));
  }
}

}  // namespace
}  // namespace flopscope::tls
