// Helpers shared by the console tests: a scratch directory and calling a router directly.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "net/router.h"

namespace uplink::console::testing {

// A fresh directory under $TMPDIR, removed with everything in it at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "console-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline net::Response Call(const net::Router& router, net::Request request) {
  std::optional<net::Response> response;
  router.Dispatch(std::move(request), [&](net::Response r) { response = std::move(r); });
  EXPECT_TRUE(response.has_value()) << "the handler did not reply";
  return response.value_or(net::Response{});
}

}  // namespace uplink::console::testing
