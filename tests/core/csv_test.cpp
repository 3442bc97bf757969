#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/csv.h"
#include "core/hash.h"

using namespace servesim;
namespace fs = std::filesystem;

namespace {

fs::path write_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("servesim_core_csv_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::vector<std::string> fields_of(const std::string& line) {
  std::vector<CsvSpan> spans;
  int column = 0;
  std::string error;
  REQUIRE(split_csv_spans(line, spans, column, error));
  std::vector<std::string> out;
  for (const CsvSpan& s : spans) out.push_back(csv_field_text(without_cr(line), s));
  return out;
}

// Every record of a file, as text.
std::vector<std::vector<std::string>> records(const fs::path& p, std::vector<std::string>& header) {
  CsvReader r(p.string());
  header = r.header();
  Problems problems;
  std::vector<std::vector<std::string>> out;
  while (r.next(problems)) {
    std::vector<std::string> row;
    for (std::size_t i = 0; i < r.fields(); ++i) row.emplace_back(r.field(i));
    out.push_back(row);
  }
  problems.throw_if_any();
  return out;
}

}  // namespace

TEST_CASE("split_csv_spans: plain, quoted, escaped quotes, empty and trailing fields") {
  CHECK(fields_of("a,b,c") == std::vector<std::string>{"a", "b", "c"});
  CHECK(fields_of("\"a,b\",c") == std::vector<std::string>{"a,b", "c"});
  CHECK(fields_of("\"say \"\"hi\"\"\",x") == std::vector<std::string>{"say \"hi\"", "x"});
  CHECK(fields_of("a,,c") == std::vector<std::string>{"a", "", "c"});
  CHECK(fields_of("a,b,") == std::vector<std::string>{"a", "b", ""});
  CHECK(fields_of("a,b\r") == std::vector<std::string>{"a", "b"});
  CHECK(fields_of("") == std::vector<std::string>{""});
}

TEST_CASE("split_csv_spans: a broken quote names its column") {
  std::vector<CsvSpan> spans;
  int column = 0;
  std::string error;
  CHECK_FALSE(split_csv_spans("1,\"open", spans, column, error));
  CHECK(column == 3);  // the opening quote
  CHECK(error.find("unterminated quoted field") != std::string::npos);
  CHECK_FALSE(split_csv_spans("\"a\"b,c", spans, column, error));
  CHECK(column == 4);  // the 'b' after the closing quote
  CHECK(error.find("after a closing quote") != std::string::npos);
}

TEST_CASE("CsvReader: LF and CRLF files give the same records; blank lines are not records") {
  const std::string lf = "x,y\n1,2\n\n3,\"4,5\"\n";
  std::string crlf;
  for (const char c : lf) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const fs::path a = write_temp("lf.csv", lf), b = write_temp("crlf.csv", crlf);
  std::vector<std::string> ha, hb;
  const auto ra = records(a, ha), rb = records(b, hb);
  CHECK(ha == std::vector<std::string>{"x", "y"});
  CHECK(hb == ha);
  CHECK(ra == std::vector<std::vector<std::string>>{{"1", "2"}, {"3", "4,5"}});
  CHECK(rb == ra);
  // A last line without a line end is a record too.
  const fs::path c = write_temp("noeol.csv", "x,y\r\n1,2\r\n3,4");
  std::vector<std::string> hc;
  CHECK(records(c, hc).size() == 2);
  fs::remove(a);
  fs::remove(b);
  fs::remove(c);
}

TEST_CASE("CsvReader: problems name file, line, column and key; all of them are reported") {
  const fs::path p = write_temp("bad.csv", "x,y\n1,2,3\n\"a,2\nq,\"r\"s\n5,6\n");
  CsvReader r(p.string(), CsvOptions{"trace file", "workload.lengths.trace"});
  Problems problems;
  int good = 0;
  while (r.next(problems)) ++good;
  CHECK(good == 1);  // 5,6
  REQUIRE(problems.count() == 3);
  const auto all = problems.all();
  CHECK(all[0].line == 2);
  CHECK(all[0].message.find("expected 2 comma-separated fields as in the header, found 3") != std::string::npos);
  CHECK(all[1].line == 3);
  CHECK(all[1].column == 1);
  CHECK(all[2].line == 4);
  CHECK(all[2].column == 6);
  CHECK(all[0].path == "workload.lengths.trace");
  fs::remove(p);
}

TEST_CASE("CsvReader: typed fields and columns report at the field, with the column in the key path") {
  const fs::path p = write_temp("typed.csv", "a,b\n7,x\n");
  CsvReader r(p.string(), CsvOptions{"trace file", "k"});
  Problems problems;
  REQUIRE(r.next(problems));
  CHECK(r.integer(0, problems) == 7);
  CHECK_FALSE(r.real(1, problems).has_value());
  REQUIRE(problems.count() == 1);
  CHECK(problems.all()[0].path == "k (column b)");
  CHECK(problems.all()[0].column == 3);
  CHECK_THROWS_AS(r.require_column("c"), InputError);
  const auto cols = r.columns({"b", "bb"}, problems);
  CHECK(cols[0] == 1);
  CHECK(cols[1] == std::string::npos);
  CHECK(problems.all().back().message == "missing column 'bb' (did you mean 'b'?)");
  fs::remove(p);
}

TEST_CASE("CsvReader: a missing file, an empty file and a repeated column are input errors") {
  CHECK_THROWS_AS(CsvReader("/nonexistent/servesim.csv"), InputError);
  const fs::path e = write_temp("empty.csv", "\n\n");
  CHECK_THROWS_AS(CsvReader(e.string()), InputError);
  const fs::path d = write_temp("dup.csv", "a,a\n1,2\n");
  CHECK_THROWS_AS(CsvReader(d.string()), InputError);
  fs::remove(e);
  fs::remove(d);
}

TEST_CASE("fnv1a64: the published test vectors, and hashing in pieces equals hashing at once") {
  // FNV-1a 64 of "" is the offset basis; of "a", 0xaf63dc4c8601ec8c; of "foobar",
  // 0x85944171f73967e8 (the test vectors of the FNV reference, isthe.com/chongo/tech/comp/fnv).
  CHECK(fnv1a64("") == 0xcbf29ce484222325ULL);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ULL);
  CHECK(fnv1a64("bar", fnv1a64("foo")) == fnv1a64("foobar"));
  CHECK(hex64(fnv1a64("a")) == "af63dc4c8601ec8c");
}
