/* A replay's timeline as text, JSON and an SVG picture in the manner of
 * the critique's figures: one lane per client, per Redis node that took
 * part, the network and the storage; leases and pauses as bars, writes as
 * arrows into the storage lane. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "scenario.h"

void sc_print_timeline(FILE *f, const struct sc_result *r)
{
    fprintf(f, "== %s (%s) ==\n", r->scenario, sc_mode_name(r->mode));
    for (int i = 0; i < r->n_ev; i++) {
        const struct sc_event *e = &r->ev[i];
        fprintf(f, "%6lld ms  %-9s %s\n", e->t_ms,
                strcmp(e->lane, "A") == 0   ? "client A"
                : strcmp(e->lane, "B") == 0 ? "client B"
                                            : e->lane,
                e->text);
    }
    fprintf(f, "verdict: %s\n\n", r->verdict);
}

int sc_write_json(FILE *f, const struct sc_result *runs, int n)
{
    json_t *all = json_array();
    for (int k = 0; k < n; k++) {
        const struct sc_result *r = &runs[k];
        json_t *evs = json_array();
        for (int i = 0; i < r->n_ev; i++) {
            const struct sc_event *e = &r->ev[i];
            json_t *j = json_pack("{s:I,s:s,s:s,s:s}", "t_ms", (json_int_t)e->t_ms, "lane", e->lane, "kind",
                                  e->kind, "text", e->text);
            if (e->end_ms >= 0)
                json_object_set_new(j, "end_ms", json_integer(e->end_ms));
            json_array_append_new(evs, j);
        }
        json_array_append_new(all, json_pack("{s:s,s:s,s:i,s:I,s:I,s:I,s:i,s:i,s:b,s:b,s:s,s:s,s:o}",
                                             "scenario", r->scenario, "mode", sc_mode_name(r->mode), "nodes",
                                             r->n_nodes, "ttl_ms", (json_int_t)r->ttl_ms, "token_a",
                                             (json_int_t)r->token_a, "token_b", (json_int_t)r->token_b,
                                             "status_a", r->status_a, "status_b", r->status_b, "double_grant",
                                             r->double_grant, "lost_update", r->lost_update, "final_value",
                                             r->final_value, "verdict", r->verdict, "events", evs));
    }
    int rc = json_dumpf(all, f, JSON_INDENT(2)) == 0 ? 0 : -1;
    fputc('\n', f);
    json_decref(all);
    return rc;
}

/* ---- SVG ---- */

#define W 1100
#define LEFT 110
#define RIGHT 20
#define LANE_H 48
#define TITLE_H 46

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

/* Lanes in a fixed order: A, B, the nodes that appear, network, storage. */
static int lanes(const struct sc_result *r, char names[][16], int cap)
{
    int n = 0;
    const char *fixed[] = {"A", "B"};
    for (int i = 0; i < 2 && n < cap; i++)
        snprintf(names[n++], 16, "%s", fixed[i]);
    for (int node = 1; node <= r->n_nodes && n < cap; node++) {
        char name[16];
        snprintf(name, sizeof(name), "redis %d", node & 0xff);
        for (int i = 0; i < r->n_ev; i++) {
            if (strcmp(r->ev[i].lane, name) == 0) {
                memcpy(names[n++], name, sizeof(name));
                break;
            }
        }
    }
    if (n < cap)
        snprintf(names[n++], 16, "network");
    if (n < cap)
        snprintf(names[n++], 16, "storage");
    return n;
}

static const char *lane_color(const char *lane)
{
    if (strcmp(lane, "A") == 0)
        return "#3b6fb6";
    if (strcmp(lane, "B") == 0)
        return "#d9822b";
    return "#777";
}

/* Label rows of a lane: above it, below it, further below. */
#define ROWS 3
#define SPANS_MAX 32

/* The x ranges a row's labels cover. */
struct spans {
    double a[SPANS_MAX], b[SPANS_MAX];
    int n;
};

static int overlaps(const struct spans *s, double a, double b)
{
    for (int i = 0; i < s->n; i++)
        if (a < s->b[i] + 4 && s->a[i] < b + 4)
            return 1;
    return 0;
}

static void take(struct spans *s, double a, double b)
{
    if (s->n == SPANS_MAX)
        return;
    s->a[s->n] = a;
    s->b[s->n++] = b;
}

/* One panel's geometry: its lanes, where they start, and the time axis. */
struct geom {
    char names[12][16];
    int nl;         /* lanes */
    int ly;         /* top of the first lane */
    long long tmax; /* the axis ends here, in run ms */
    double sx;      /* pixels per ms */
};

/* A lane's index; unknown lanes are drawn in the last one. */
static int lane_of(const struct geom *g, const char *lane)
{
    for (int i = 0; i < g->nl; i++)
        if (strcmp(g->names[i], lane) == 0)
            return i;
    return g->nl - 1;
}

static int lane_y(const struct geom *g, int lane)
{
    return g->ly + lane * LANE_H + LANE_H / 2;
}

/* x of a time; times past the end of the axis sit at its end. */
static double x_at(const struct geom *g, long long t)
{
    return LEFT + (double)(t < g->tmax ? t : g->tmax) * g->sx;
}

/* The axis covers every event and span, except that a lease running far
 * past the story would squash it: leases are cut at the axis end. */
static void time_axis(struct geom *g, const struct sc_result *r)
{
    long long tmax = 1;
    for (int i = 0; i < r->n_ev; i++) {
        const struct sc_event *e = &r->ev[i];
        long long t = e->end_ms > e->t_ms ? e->end_ms : e->t_ms;
        if (e->end_ms < 0 || strcmp(e->kind, "lease") != 0)
            tmax = t > tmax ? t : tmax;
    }
    g->tmax = tmax * 11 / 10 + 10;
    g->sx = (double)(W - LEFT - RIGHT) / (double)g->tmax;
}

static void draw_title(FILE *f, const struct sc_result *r, int y0)
{
    fprintf(f, "<text x=\"10\" y=\"%d\" class=\"title\">", y0 + 20);
    xml_text(f, r->scenario);
    fprintf(f, " — %s</text>\n<text x=\"10\" y=\"%d\" class=\"verdict\">", sc_mode_name(r->mode), y0 + 38);
    xml_text(f, r->verdict);
    fputs("</text>\n", f);
}

/* A name and a horizontal line per lane. */
static void draw_lanes(FILE *f, const struct geom *g)
{
    for (int i = 0; i < g->nl; i++) {
        int y = lane_y(g, i);
        fprintf(f, "<text x=\"10\" y=\"%d\" class=\"lane\">%s</text>\n", y + 4,
                strcmp(g->names[i], "A") == 0   ? "client A"
                : strcmp(g->names[i], "B") == 0 ? "client B"
                                                : g->names[i]);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>\n", LEFT, y, W - RIGHT, y);
    }
}

/* Time ticks under the last lane: at most about eight, at 1, 2 or 5 times
 * a power of ten. */
static void draw_ticks(FILE *f, const struct geom *g)
{
    static const int nice[] = {1, 2, 5};
    long long step = 1;
    for (long long p = 1; step * 8 < g->tmax; p *= 10)
        for (int k = 0; k < 3 && step * 8 < g->tmax; k++)
            step = nice[k] * p;
    int yb = g->ly + g->nl * LANE_H;
    for (long long t = 0; t <= g->tmax; t += step)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"tick\">%lld ms</text>\n", x_at(g, t), yb + 12, t);
}

/* An event's mark: a bar for a span (a pause sits on the lease it spoils:
 * thinner, on top), an arrow from the writer's lane into the storage lane
 * for a write, a dot with a tooltip for the rest. */
static void draw_mark(FILE *f, const struct geom *g, const struct sc_event *e)
{
    int y = lane_y(g, lane_of(g, e->lane));
    double x = x_at(g, e->t_ms);
    if (e->end_ms >= 0) {
        double x2 = x_at(g, e->end_ms);
        const char *cls = strcmp(e->kind, "lease") == 0   ? "lease"
                          : strcmp(e->kind, "pause") == 0 ? "pause"
                          : strcmp(e->kind, "hold") == 0  ? "pause"
                                                          : "span";
        int h = strcmp(cls, "pause") == 0 ? 4 : 10;
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" class=\"%s\" fill=\"%s\">", x,
                y - h / 2, x2 - x < 2 ? 2 : x2 - x, h, cls, lane_color(e->lane));
        fputs("<title>", f);
        xml_text(f, e->text);
        fputs("</title></rect>\n", f);
    } else if (strncmp(e->kind, "write", 5) == 0) {
        int ok = strcmp(e->kind, "write-ok") == 0;
        int from = strstr(e->text, "by A") ? lane_of(g, "A") : lane_of(g, "B");
        int storage_y = lane_y(g, lane_of(g, "storage"));
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"%s\" marker-end=\"url(#%s)\"/>\n",
                x, lane_y(g, from), x, storage_y - 6, ok ? "ok" : "refused", ok ? "ok" : "refused");
    } else {
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%d\" r=\"3\" fill=\"%s\"><title>", x, y, lane_color(e->lane));
        xml_text(f, e->text);
        fputs("</title></circle>\n", f);
    }
}

/* An event's label, in the first of its lane's rows where it covers no
 * other label (used[] are the lane's rows). Near the right edge a label
 * ends at its event instead of starting there. Minor steps get none: their
 * dot's tooltip is enough. */
static void draw_label(FILE *f, const struct geom *g, const struct sc_event *e, struct spans used[ROWS])
{
    static const int row_dy[ROWS] = {-8, 15, 26};
    if (strcmp(e->kind, "step") == 0)
        return;
    int y = lane_y(g, lane_of(g, e->lane));
    double x = x_at(g, e->t_ms);
    char shortt[72];
    snprintf(shortt, sizeof(shortt), "%.60s%s", e->text, strlen(e->text) > 60 ? "..." : "");
    double width = 5.0 * (double)strlen(shortt);
    int end_anchor = x + 3 + width > W - 5;
    double a = end_anchor ? x - 3 - width : x + 3, b = a + width;
    int row = 0;
    while (row < ROWS - 1 && overlaps(&used[row], a, b))
        row++;
    take(&used[row], a, b);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"%s\" class=\"label\">", end_anchor ? x - 3 : x + 3,
            y + row_dy[row], end_anchor ? "end" : "start");
    xml_text(f, shortt);
    fputs("</text>\n", f);
}

/* One run's panel, its top at y0: title and verdict, lanes, ticks, then
 * every event's mark and label in time order. */
static void panel(FILE *f, const struct sc_result *r, int y0)
{
    struct geom g;
    g.nl = lanes(r, g.names, 12);
    g.ly = y0 + TITLE_H;
    time_axis(&g, r);
    draw_title(f, r, y0);
    draw_lanes(f, &g);
    draw_ticks(f, &g);
    struct spans used[12][ROWS];
    memset(used, 0, sizeof(used));
    for (int i = 0; i < r->n_ev; i++) {
        draw_mark(f, &g, &r->ev[i]);
        draw_label(f, &g, &r->ev[i], used[lane_of(&g, r->ev[i].lane)]);
    }
}

int sc_write_svg(FILE *f, const struct sc_result *runs, int n)
{
    int height = 10, heights[32];
    for (int k = 0; k < n && k < 32; k++) {
        char names[12][16];
        heights[k] = TITLE_H + lanes(&runs[k], names, 12) * LANE_H + 30;
        height += heights[k];
    }
    fprintf(
        f,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
        "font-family=\"sans-serif\">\n"
        "<style>.title{font-size:15px;font-weight:bold}.verdict{font-size:12px;fill:#333}"
        ".lane{font-size:12px}.axis{stroke:#ccc}.tick{font-size:9px;fill:#888}"
        ".label{font-size:9px;fill:#222}.lease{opacity:.55}.pause{fill:#c22;opacity:.8}"
        ".ok{stroke:#2a8a2a;stroke-width:2}.refused{stroke:#c22;stroke-width:2;stroke-dasharray:4 "
        "2}</style>\n"
        "<defs><marker id=\"ok\" markerWidth=\"8\" markerHeight=\"8\" refX=\"4\" refY=\"4\" orient=\"auto\">"
        "<path d=\"M0,0 L8,4 L0,8 z\" fill=\"#2a8a2a\"/></marker>"
        "<marker id=\"refused\" markerWidth=\"8\" markerHeight=\"8\" refX=\"4\" refY=\"4\" orient=\"auto\">"
        "<path d=\"M0,0 L8,4 L0,8 z\" fill=\"#c22\"/></marker></defs>\n"
        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
        W, height, W, height);
    int y = 10;
    for (int k = 0; k < n && k < 32; k++) {
        panel(f, &runs[k], y);
        y += heights[k];
    }
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}
