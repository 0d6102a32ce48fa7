#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/metrics.h"
#include "io/plot.h"
#include "io/safetensors.h"
#include "../file_test_helpers.h"

namespace pipetrain {
namespace {

TensorEntry float_tensor(const std::string& name, std::vector<int64_t> shape,
                         const std::vector<float>& values) {
  TensorEntry entry{name, "F32", std::move(shape), std::string(values.size() * 4, '\0')};
  std::memcpy(entry.bytes.data(), values.data(), entry.bytes.size());
  return entry;
}

TEST(Safetensors, RoundTripKeepsNamesShapesBytesAndMetadata) {
  const auto a = float_tensor("b.weight", {2, 3}, {1, 2, 3, 4, 5, 6});
  const auto b = float_tensor("a.bias", {1}, {-0.5f});
  const std::string file = encode_safetensors({a, b}, {{"step", "12"}});
  // header length is 8-byte aligned so the data is too
  uint64_t header_length = 0;
  std::memcpy(&header_length, file.data(), 8);
  EXPECT_EQ(header_length % 8, 0u);
  std::map<std::string, std::string> metadata;
  const auto decoded = decode_safetensors(file, "mem", &metadata);
  ASSERT_EQ(decoded.size(), 2u);
  EXPECT_EQ(metadata.at("step"), "12");
  for (const auto& entry : decoded) {
    const auto& original = entry.name == a.name ? a : b;
    EXPECT_EQ(entry.shape, original.shape);
    EXPECT_EQ(entry.bytes, original.bytes);
  }
}

TEST(Safetensors, DamagedFilesAreUserErrors) {
  const std::string file = encode_safetensors({float_tensor("w", {4}, {1, 2, 3, 4})});
  EXPECT_THROW(decode_safetensors(file.substr(0, 5), "f"), UserError);              // no header
  EXPECT_THROW(decode_safetensors(file.substr(0, file.size() - 3), "f"), UserError);  // truncated
  std::string corrupt = file;
  corrupt[8] = '#';  // the header's opening brace
  EXPECT_THROW(decode_safetensors(corrupt, "f"), UserError);
  EXPECT_THROW(encode_safetensors({float_tensor("w", {5}, {1, 2, 3, 4})}), UserError);
}

TEST(Metrics, OneJsonObjectPerLine) {
  const auto dir = test::fresh_folder("pipetrain_metrics");
  const auto path = (dir / "metrics.jsonl").string();
  {
    MetricsWriter stale(path, false);
    stale.write({{"step", 9}});
  }
  {
    MetricsWriter writer(path, false);  // a new run starts afresh
    writer.write({{"step", 1}, {"loss", 2.5}});
  }
  {
    MetricsWriter writer(path, true);  // a resumed run appends
    writer.write({{"step", 2}, {"loss", 2.0}, {"val_loss", 2.1}});
  }
  const auto records = read_metrics(path);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["step"], 1);
  EXPECT_EQ(records[1]["step"], 2);
  EXPECT_DOUBLE_EQ(records[1]["val_loss"].get<double>(), 2.1);
  std::filesystem::remove_all(dir);
}

TEST(Plot, SvgHasOnePolylinePerSeriesAndEscapesText) {
  const std::string svg = render_line_plot_svg(
      {{"train", "red", {{0, 3}, {1, 2}, {2, 1.5}}}, {"val <b>", "blue", {{2, 1.7}}}}, "loss & co",
      "step", "loss");
  size_t polylines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) {
    ++polylines;
  }
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(svg.find("<circle"), std::string::npos);  // the one validation point is visible
  EXPECT_NE(svg.find("loss &amp; co"), std::string::npos);
  EXPECT_NE(svg.find("val &lt;b&gt;"), std::string::npos);
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
}

TEST(Plot, AxesCarryRoundNumbers) {
  // 800 steps logged every 10: the old axis labelled 1, 160.8, 320.6, ...
  std::vector<std::pair<double, double>> points;
  for (int step = 1; step <= 800; step += 10) points.push_back({step, 5.5 - step / 200.0});
  const std::string svg = render_line_plot_svg({{"train", "red", points}}, "t", "step", "loss");
  // Losses 1.545..5.495 get the axis 1..6; steps 1..791 get 0..800.
  for (const char* label : {">0<", ">200<", ">400<", ">600<", ">800<", ">1<", ">6<"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  EXPECT_EQ(svg.find("160.8"), std::string::npos);
  EXPECT_EQ(svg.find("1.545"), std::string::npos);
}

}  // namespace
}  // namespace pipetrain
