#include "cli/render.h"

#include <gtest/gtest.h>

#include <sstream>

namespace uplink::cli {
namespace {

TEST(Render, TableColumnsAreAsWideAsTheirWidestCellCountingCharacters) {
  Table table({"ID", "CLUSTER", "GPUS"});
  table.AddRow({"1", "gpu-ä", "8/8"});
  table.AddRow({"22", "b", "0/16"});
  std::ostringstream out;
  table.Render(out);
  EXPECT_EQ(out.str(),
            "ID  CLUSTER  GPUS\n"
            "1   gpu-ä    8/8\n"
            "22  b        0/16\n");
}

TEST(Render, MissingCellsAreBlankAndExtraCellsDropped) {
  Table table({"A", "B"});
  table.AddRow({"x"});
  table.AddRow({"1", "2", "3"});
  std::ostringstream out;
  table.Render(out);
  EXPECT_EQ(out.str(), "A  B\nx  \n1  2\n");
}

TEST(Render, DisplayNeverThrowsOnMissingOrWronglyTypedFields) {
  auto value = ParseJson(R"({"s":"text","n":7,"u":18446744073709551615,"d":1.5,"b":true,
                             "z":null,"o":{"k":1},"a":[1],"e":""})");
  ASSERT_TRUE(value.ok());
  const json::object& o = value->get_object();
  EXPECT_EQ(Display(o, "s"), "text");
  EXPECT_EQ(Display(o, "n"), "7");
  EXPECT_EQ(Display(o, "u"), "18446744073709551615");
  EXPECT_EQ(Display(o, "d"), "1.5E0");
  EXPECT_EQ(Display(o, "b"), "yes");
  EXPECT_EQ(Display(o, "z"), "-");
  EXPECT_EQ(Display(o, "missing"), "-");
  EXPECT_EQ(Display(o, "o"), "(object)");
  EXPECT_EQ(Display(o, "a"), "(list)");
  EXPECT_EQ(Display(o, "e"), "-");
  EXPECT_EQ(DisplayJson(o, "o"), R"({"k":1})");
  EXPECT_EQ(DisplayJson(o, "a"), "[1]");
  EXPECT_EQ(DisplayJson(o, "s"), "text");
  EXPECT_EQ(StringField(o, "n"), std::nullopt);
  EXPECT_EQ(ObjectField(o, "a"), nullptr);
  EXPECT_EQ(ArrayField(o, "o"), nullptr);
}

TEST(Render, ControlCharactersFromTheConsoleNeverReachTheTerminal) {
  json::value hostile = "\x1b]0;owned\x07\x1b[2J\r\nnext line\x7f";
  std::string shown = Display(&hostile);
  for (char c : shown) {
    unsigned char u = static_cast<unsigned char>(c);
    EXPECT_FALSE(u < 0x20 || u == 0x7f) << "control byte " << int(u) << " in " << shown;
  }
  EXPECT_NE(shown.find("next line"), std::string::npos);
}

TEST(Render, LongValuesAreShortened) {
  json::value long_text(std::string(10000, 'x'));
  std::string shown = Display(&long_text, 50);
  EXPECT_EQ(shown, std::string(50, 'x') + "...");
}

TEST(Render, FieldsAlignValues) {
  Fields fields;
  fields.Add("id", "abc");
  fields.Add("token prefix", "agt_x");
  std::ostringstream out;
  fields.Render(out);
  EXPECT_EQ(out.str(), "id:            abc\ntoken prefix:  agt_x\n");
}

}  // namespace
}  // namespace uplink::cli
