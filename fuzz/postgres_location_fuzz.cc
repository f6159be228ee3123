// The PostgreSQL store's URL comes from the operator's command line or environment, and the
// engine numbers the `?` of SQL text: any bytes reach both.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "console/store/sql/postgres_database.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace uplink::console::sql;
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto location = ParsePostgresLocation(text);
  if (location.ok()) {
    // What is accepted is kept as given, has a libpq scheme, and no bytes libpq would cut.
    FUZZ_CHECK(location->url == text);
    FUZZ_CHECK(text.starts_with("postgres://") || text.starts_with("postgresql://"));
    FUZZ_CHECK(text.find('\0') == std::string_view::npos);
    FUZZ_CHECK(!location->password.has_value());
  } else {
    FUZZ_CHECK(!location.status().message().empty());
  }

  // Each `?` numbered becomes "$n": the text grows by exactly the digits added.
  NumberedSql numbered = NumberParameters(text);
  size_t added = 0;
  for (int n = 1; n <= numbered.parameters; ++n) added += std::to_string(n).size();
  FUZZ_CHECK(numbered.parameters <= static_cast<int>(std::count(text.begin(), text.end(), '?')));
  FUZZ_CHECK(numbered.sql.size() == text.size() + added);
  return 0;
}
