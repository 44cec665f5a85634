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

static int lane_of(char names[][16], int n, const char *lane)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], lane) == 0)
            return i;
    return n - 1;
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

static void panel(FILE *f, const struct sc_result *r, int y0)
{
    char names[12][16];
    int nl = lanes(r, names, 12);
    long long tmax = 1;
    for (int i = 0; i < r->n_ev; i++) {
        const struct sc_event *e = &r->ev[i];
        long long t = e->end_ms > e->t_ms ? e->end_ms : e->t_ms;
        /* A lease far longer than the story would squash it: cut the axis. */
        if (e->end_ms < 0 || strcmp(e->kind, "lease") != 0)
            tmax = t > tmax ? t : tmax;
    }
    tmax = tmax * 11 / 10 + 10;
    double sx = (double)(W - LEFT - RIGHT) / (double)tmax;
#define X(t) (LEFT + (double)((t) < tmax ? (t) : tmax) * sx)
    fprintf(f, "<text x=\"10\" y=\"%d\" class=\"title\">", y0 + 20);
    xml_text(f, r->scenario);
    fprintf(f, " — %s</text>\n<text x=\"10\" y=\"%d\" class=\"verdict\">", sc_mode_name(r->mode), y0 + 38);
    xml_text(f, r->verdict);
    fputs("</text>\n", f);
    int ly = y0 + TITLE_H;
    for (int i = 0; i < nl; i++) {
        int y = ly + i * LANE_H + LANE_H / 2;
        fprintf(f, "<text x=\"10\" y=\"%d\" class=\"lane\">%s</text>\n", y + 4,
                strcmp(names[i], "A") == 0   ? "client A"
                : strcmp(names[i], "B") == 0 ? "client B"
                                             : names[i]);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>\n", LEFT, y, W - RIGHT, y);
    }
    /* Time ticks. */
    /* At most about eight ticks, at 1, 2 or 5 times a power of ten. */
    static const int nice[] = {1, 2, 5};
    long long step = 1;
    for (long long p = 1; step * 8 < tmax; p *= 10)
        for (int k = 0; k < 3 && step * 8 < tmax; k++)
            step = nice[k] * p;
    int yb = ly + nl * LANE_H;
    for (long long t = 0; t <= tmax; t += step)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"tick\">%lld ms</text>\n", X(t), yb + 12, t);
    int storage_y = ly + lane_of(names, nl, "storage") * LANE_H + LANE_H / 2;
    static const int row_dy[ROWS] = {-8, 15, 26};
    struct spans used[12][ROWS];
    memset(used, 0, sizeof(used));
    for (int i = 0; i < r->n_ev; i++) {
        const struct sc_event *e = &r->ev[i];
        int li = lane_of(names, nl, e->lane);
        int y = ly + li * LANE_H + LANE_H / 2;
        double x = X(e->t_ms);
        if (e->end_ms >= 0) {
            double x2 = X(e->end_ms);
            const char *cls = strcmp(e->kind, "lease") == 0   ? "lease"
                              : strcmp(e->kind, "pause") == 0 ? "pause"
                              : strcmp(e->kind, "hold") == 0  ? "pause"
                                                              : "span";
            /* A pause sits on the lease it spoils: thinner, on top. */
            int h = strcmp(cls, "pause") == 0 ? 4 : 10;
            fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" class=\"%s\" fill=\"%s\">", x,
                    y - h / 2, x2 - x < 2 ? 2 : x2 - x, h, cls, lane_color(e->lane));
            fputs("<title>", f);
            xml_text(f, e->text);
            fputs("</title></rect>\n", f);
        } else if (strncmp(e->kind, "write", 5) == 0) {
            int ok = strcmp(e->kind, "write-ok") == 0;
            /* The arrow starts in the writer's lane. */
            int from = strstr(e->text, "by A") ? lane_of(names, nl, "A") : lane_of(names, nl, "B");
            int fy = ly + from * LANE_H + LANE_H / 2;
            fprintf(
                f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"%s\" marker-end=\"url(#%s)\"/>\n",
                x, fy, x, storage_y - 6, ok ? "ok" : "refused", ok ? "ok" : "refused");
        } else {
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%d\" r=\"3\" fill=\"%s\"><title>", x, y,
                    lane_color(e->lane));
            xml_text(f, e->text);
            fputs("</title></circle>\n", f);
        }
        /* Minor steps are dots with a tooltip; the rest get a label in the
         * first of the lane's rows where it covers no other label. Near the
         * right edge a label ends at its event instead of starting there. */
        if (strcmp(e->kind, "step") == 0)
            continue;
        char shortt[72];
        snprintf(shortt, sizeof(shortt), "%.60s%s", e->text, strlen(e->text) > 60 ? "..." : "");
        double width = 5.0 * (double)strlen(shortt);
        int end_anchor = x + 3 + width > W - 5;
        double a = end_anchor ? x - 3 - width : x + 3, b = a + width;
        int row = 0;
        while (row < ROWS - 1 && overlaps(&used[li][row], a, b))
            row++;
        take(&used[li][row], a, b);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"%s\" class=\"label\">",
                end_anchor ? x - 3 : x + 3, y + row_dy[row], end_anchor ? "end" : "start");
        xml_text(f, shortt);
        fputs("</text>\n", f);
    }
#undef X
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
