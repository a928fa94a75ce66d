import { BarChart, CustomChart, LineChart, ScatterChart, TreeChart } from "echarts/charts";
import { DataZoomComponent, GridComponent, LegendComponent, TooltipComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import { useEffect, useRef } from "react";

echarts.use([
  BarChart,
  CustomChart,
  LineChart,
  ScatterChart,
  TreeChart,
  GridComponent,
  LegendComponent,
  TooltipComponent,
  DataZoomComponent,
  CanvasRenderer,
]);

export type ChartOption = echarts.EChartsCoreOption;

export interface ChartProps {
  option: ChartOption;
  testId: string;
  height?: number;
  /** How many data points the chart shows, exposed as `data-points` for tests (the canvas is opaque). */
  points: number;
}

/**
 * An ECharts chart (canvas). Tooltips render on the canvas too (`renderMode: "richText"`), so the chart adds no
 * inline style attributes and works under a strict `style-src 'self'`.
 */
export function Chart({ option, testId, height = 260, points }: ChartProps) {
  const ref = useRef<HTMLDivElement>(null);
  const chart = useRef<echarts.ECharts | undefined>(undefined);

  useEffect(() => {
    const element = ref.current;
    if (element === null) return;
    const instance = echarts.init(element, undefined, { renderer: "canvas" });
    chart.current = instance;
    const observer = new ResizeObserver(() => instance.resize());
    observer.observe(element);
    return () => {
      observer.disconnect();
      instance.dispose();
      chart.current = undefined;
    };
  }, []);

  useEffect(() => {
    // Legends on top, above the plot, whatever the chart says about the rest.
    const legend = option.legend === undefined ? {} : { legend: { top: 0, ...(option.legend as object) } };
    chart.current?.setOption(
      { animation: false, tooltip: { renderMode: "richText", trigger: "axis" }, ...option, ...legend },
      { notMerge: true },
    );
  }, [option]);

  return <div ref={ref} className="chart" data-testid={testId} data-points={points} style={{ height }} />;
}
