#pragma once

#include <string>
#include <vector>

namespace flopscope::client {

// Columns of text lined up for a terminal: the first column left-aligned (names, indented to show
// depth), the others right-aligned (figures), two spaces between columns, no trailing blanks.
// Every header and cell passes through PrintableForTerminal (common/utf8.h): cells hold producer
// text, and a control character in one must neither act on the terminal nor break the layout.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> headers);

  // Missing cells are left blank; extra cells are a programming error and are dropped.
  void AddRow(std::vector<std::string> cells);

  // Header, a rule under it, then the rows; each line ends with '\n'. `indent` prefixes every line.
  std::string Render(const std::string& indent = "") const;

 private:
  std::string RenderLine(const std::vector<std::string>& cells,
                         const std::vector<size_t>& widths) const;

  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace flopscope::client
