#include "client/text/text_table.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "common/utf8.h"

namespace flopscope::client {
namespace {

// Display width, counting each UTF-8 code point once (module names may hold non-ASCII text).
size_t DisplayWidth(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

}  // namespace

TextTable::TextTable(std::vector<std::string> headers) : headers_(std::move(headers)) {
  for (std::string& header : headers_) header = PrintableForTerminal(header);
}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  // Cells hold producer text (range, module and kernel names): never let it act on the terminal.
  for (std::string& cell : cells) cell = PrintableForTerminal(cell);
  rows_.push_back(std::move(cells));
}

std::string TextTable::RenderLine(const std::vector<std::string>& cells,
                                  const std::vector<size_t>& widths) const {
  std::string line;
  for (size_t column = 0; column < cells.size(); ++column) {
    const size_t padding = widths[column] - DisplayWidth(cells[column]);
    if (column > 0) line += "  ";
    if (column == 0) {
      line += cells[column];
      line.append(padding, ' ');
    } else {
      line.append(padding, ' ');
      line += cells[column];
    }
  }
  return std::string(absl::StripTrailingAsciiWhitespace(line));
}

std::string TextTable::Render(const std::string& indent) const {
  std::vector<size_t> widths(headers_.size(), 0);
  for (size_t column = 0; column < headers_.size(); ++column) {
    widths[column] = DisplayWidth(headers_[column]);
    for (const auto& row : rows_)
      widths[column] = std::max(widths[column], DisplayWidth(row[column]));
  }
  size_t total_width = 0;
  for (size_t width : widths) total_width += width;
  total_width += 2 * (widths.empty() ? 0 : widths.size() - 1);

  std::string out = indent + RenderLine(headers_, widths) + "\n";
  out += indent + std::string(total_width, '-') + "\n";
  for (const auto& row : rows_) out += indent + RenderLine(row, widths) + "\n";
  return out;
}

}  // namespace flopscope::client
