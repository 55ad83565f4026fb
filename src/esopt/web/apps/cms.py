"""The shop admin's pages: a dashboard, products (search, edit), orders, customers."""

from __future__ import annotations

from flask import redirect, request

from esopt.web.apps.common import (
    EpisodeStore,
    commit,
    create_base_app,
    esc,
    form,
    like_pattern,
    link,
    one,
    page,
    rows,
    select,
    table,
    text_input,
)
from esopt.web.sites.cms import STATUSES


def create_app(store: EpisodeStore, admin_key: str):
    """The shop admin's Flask app."""
    app = create_base_app("cms", store, admin_key)

    def show(title: str, body: str) -> str:
        return page("Admin", title, body, [("/admin", "Dashboard"), ("/admin/products",
                    "Products"), ("/admin/orders", "Orders"), ("/admin/customers", "Customers")])

    @app.get("/")
    @app.get("/admin")
    def dashboard():
        sales = one("SELECT COALESCE(SUM(total), 0) AS s FROM orders WHERE status != 'canceled'")
        return show("Dashboard", f"<p>Lifetime sales: ${sales['s']:.2f}</p>")

    @app.get("/admin/products")
    def products():
        q = request.args.get("q", "").strip()
        found = rows("SELECT * FROM products WHERE name LIKE ? ESCAPE '\\' "
                     "OR sku LIKE ? ESCAPE '\\' ORDER BY id", like_pattern(q), like_pattern(q))
        search = form("/admin/products", text_input("q", "Search by keyword", q, "search"),
                      "Search", method="get")
        return show("Products", search + f"<p>{len(found)} records found</p>" + table(
            ["Name", "SKU", "Price", "Quantity", "Status"],
            [[link(f"/admin/products/{p['id']}", p["name"]), esc(p["sku"]),
              f"${p['price']:.2f}", str(p["qty"]), p["status"]] for p in found]))

    @app.route("/admin/products/<int:pid>", methods=["GET", "POST"])
    def product(pid):
        p = one("SELECT * FROM products WHERE id = ?", pid)
        message = ""
        if request.method == "POST":
            f = request.form
            try:
                price, qty = round(float(f.get("price", "")), 2), int(f.get("qty", ""))
                if price < 0 or qty < 0 or f.get("status") not in ("enabled", "disabled"):
                    raise ValueError
            except ValueError:
                message = "<p>Enter a price, a whole quantity and a status.</p>"
            else:
                commit("UPDATE products SET price = ?, qty = ?, status = ? WHERE id = ?",
                       price, qty, f["status"], pid)
                return redirect(f"/admin/products/{pid}?saved=1", 303)
        if request.args.get("saved"):
            message = "<p>You saved the product.</p>"
        fields = (text_input("price", "Price", f"{p['price']:.2f}")
                  + text_input("qty", "Quantity", p["qty"])
                  + select("status", "Status", [("enabled", "Enabled"),
                                                ("disabled", "Disabled")], p["status"]))
        return show(p["name"], message + f"<p>SKU: {esc(p['sku'])}</p>"
                    + form(f"/admin/products/{pid}", fields, "Save"))

    @app.get("/admin/orders")
    def orders():
        status = request.args.get("status", "")
        found = rows("SELECT o.*, c.name FROM orders o JOIN customers c ON c.id = o.customer_id "
                     "WHERE o.status = ? OR ? = '' ORDER BY o.id", status, status)
        choose = form("/admin/orders", select("status", "Status", [("", "Any")] + [
            (s, s.title()) for s in STATUSES], status), "Filter", method="get")
        return show("Orders", choose + f"<p>{len(found)} records found</p>" + table(
            ["Order", "Customer", "Status", "Total", "Purchased"],
            [[link(f"/admin/orders/{o['id']}", f"#{o['id']}"), esc(o["name"]), o["status"],
              f"${o['total']:.2f}", o["placed"]] for o in found]))

    @app.get("/admin/orders/<int:oid>")
    def order(oid):
        o = one("SELECT o.*, c.name FROM orders o JOIN customers c ON c.id = o.customer_id "
                "WHERE o.id = ?", oid)
        cancel = (form(f"/admin/orders/{oid}/cancel", "", "Cancel order")
                  if o["status"] in ("pending", "processing") else "")
        return show(f"Order #{oid}", f"<p>Customer: {esc(o['name'])}</p><p>Status: "
                    f"{o['status']}</p><p>Grand total: ${o['total']:.2f}</p><p>Purchased: "
                    f"{o['placed']}</p>{cancel}")

    @app.post("/admin/orders/<int:oid>/cancel")
    def cancel(oid):
        commit("UPDATE orders SET status = 'canceled' WHERE id = ? AND status IN "
               "('pending', 'processing')", oid)
        return redirect(f"/admin/orders/{oid}", 303)

    @app.get("/admin/customers")
    def customers():
        found = rows("SELECT c.*, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) "
                     "AS n FROM customers c ORDER BY c.name")
        return show("Customers", table(["Name", "Email", "Group", "Orders"], [
            [esc(c["name"]), esc(c["email"]), esc(c["customer_group"]), str(c["n"])]
            for c in found]))

    return app
