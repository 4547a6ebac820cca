#include "dtsim/gui/timeline_pane.hpp"

#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QVBoxLayout>

namespace dtsim::gui {

TimelinePane::TimelinePane(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->setSpacing(4);

    auto* bar = new QHBoxLayout;
    title_ = new QLabel(this);
    QFont bold = title_->font();
    bold.setBold(true);
    title_->setFont(bold);
    search_ = new QLineEdit(this);
    search_->setPlaceholderText(tr("Search span names ( / )"));
    search_->setClearButtonEnabled(true);
    search_->setMinimumWidth(220);
    search_->setMaximumWidth(300);
    auto* fit = new QPushButton(tr("Fit all (F)"), this);
    auto* hint = new QLabel(tr("wheel: zoom   drag: pan   W/S A/D   click: select"), this);
    hint->setEnabled(false);
    bar->addWidget(title_, 1);
    bar->addWidget(hint);
    bar->addWidget(search_);
    bar->addWidget(fit);
    layout->addLayout(bar);

    auto* split = new QSplitter(Qt::Horizontal, this);
    view_ = new TimelineView(split);
    details_ = new QPlainTextEdit(split);
    details_->setReadOnly(true);
    details_->setPlaceholderText(tr("Click a span to see its details."));
    details_->setMinimumWidth(180);
    split->addWidget(view_);
    split->addWidget(details_);
    split->setStretchFactor(0, 5);
    split->setStretchFactor(1, 1);
    split->setSizes({1000, 240});
    layout->addWidget(split, 1);

    connect(search_, &QLineEdit::textChanged, this, [this](const QString& text) {
        view_->set_search(text);  // the view's legend counts the matches
    });
    connect(search_, &QLineEdit::returnPressed, view_, [this] { view_->setFocus(); });
    connect(view_, &TimelineView::search_requested, search_, [this] {
        search_->setFocus();
        search_->selectAll();
    });
    connect(view_, &TimelineView::span_selected, this, &TimelinePane::show_details);
    connect(fit, &QPushButton::clicked, view_, &TimelineView::fit_all);
}

void TimelinePane::set_index(std::shared_ptr<const TimelineIndex> index) {
    view_->set_index(std::move(index));
    if (!search_->text().isEmpty()) view_->set_search(search_->text());
    details_->clear();
}

void TimelinePane::set_title(const QString& title) { title_->setText(title); }

QString TimelinePane::details_text() const { return details_->toPlainText(); }

void TimelinePane::show_details(std::int32_t span) {
    if (span < 0 || !view_->index()) {
        details_->clear();
        return;
    }
    details_->setPlainText(span_description(*view_->index(), span));
}

}  // namespace dtsim::gui
